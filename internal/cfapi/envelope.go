package cfapi

import (
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
)

const jsonType = "application/json"

// apiError is a failed request as Cloudflare reports it: an HTTP status and one entry of the
// envelope's errors.
type apiError struct {
	status  int
	code    int
	message string
}

func (e *apiError) Error() string { return strconv.Itoa(e.code) + ": " + e.message }

// Cloudflare's errors (developers.cloudflare.com/queues/reference/error-codes), and the few
// duilie adds where Cloudflare documents a status and a message but no code.
var (
	errQueueNotFound = &apiError{http.StatusNotFound, 10104, "Queue does not exist"}
	errMalformedID   = &apiError{http.StatusBadRequest, 10107, "The queue ID in the request URL is not a valid queue identifier"}
	errOverloaded    = &apiError{http.StatusTooManyRequests, 10250, "Queue is overloaded"}
	errPaused        = &apiError{http.StatusConflict, 10253, "queue_delivery_paused"}
)

func errBatchDelay(msg string) *apiError {
	return &apiError{http.StatusBadRequest, 10202, "Invalid batch delay: " + msg}
}
func errMetadata(msg string) *apiError {
	return &apiError{http.StatusBadRequest, 10203, "Invalid message metadata: " + msg}
}
func errMessageSize(msg string) *apiError {
	return &apiError{http.StatusRequestEntityTooLarge, 10204, "Message size out of bounds: " + msg}
}
func errBatchSize(msg string) *apiError {
	return &apiError{http.StatusRequestEntityTooLarge, 10205, "Batch size out of bounds: " + msg}
}
func errBatchCount(msg string) *apiError {
	return &apiError{http.StatusBadRequest, 10206, "Batch count out of bounds: " + msg}
}
func errInvalid(msg string) *apiError {
	return &apiError{http.StatusBadRequest, 10207, "Request JSON body does not match expected schema: " + msg}
}
func errMalformed(msg string) *apiError {
	return &apiError{http.StatusBadRequest, 10208, "Request body is not valid JSON: " + msg}
}
func errConflict(code int, msg string) *apiError {
	return &apiError{http.StatusConflict, code, msg}
}
func errNoRoute(path string) *apiError {
	return &apiError{http.StatusNotFound, 7003, "No route for the URI: " + path}
}

// envelope is Cloudflare's response body.
type envelope struct {
	Success    bool        `json:"success"`
	Errors     []errorInfo `json:"errors"`
	Messages   []string    `json:"messages"`
	Result     any         `json:"result"`
	ResultInfo *resultInfo `json:"result_info,omitempty"`
}

type errorInfo struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

type resultInfo struct {
	Page       int `json:"page"`
	PerPage    int `json:"per_page"`
	Count      int `json:"count"`
	TotalCount int `json:"total_count"`
	TotalPages int `json:"total_pages"`
}

// ok writes result in a successful envelope.
func ok(w http.ResponseWriter, result any) {
	write(w, http.StatusOK, envelope{Success: true, Errors: []errorInfo{}, Messages: []string{}, Result: result})
}

func okPage(w http.ResponseWriter, result any, info resultInfo) {
	write(w, http.StatusOK, envelope{Success: true, Errors: []errorInfo{}, Messages: []string{}, Result: result, ResultInfo: &info})
}

// fail writes err in a failed envelope; an error that is not an *apiError is an internal one.
func fail(w http.ResponseWriter, err error) {
	var ae *apiError
	if !errors.As(err, &ae) {
		ae = &apiError{http.StatusInternalServerError, 10001, "Internal error: " + err.Error()}
	}
	if ae.status == http.StatusTooManyRequests {
		w.Header().Set("Retry-After", "1") // back off a second, as Cloudflare's rate limits ask
	}
	write(w, ae.status, envelope{Errors: []errorInfo{{ae.code, ae.message}}, Messages: []string{}})
}

func write(w http.ResponseWriter, status int, e envelope) {
	b, err := json.Marshal(e)
	if err != nil { // every result is made of plain values
		status, b = http.StatusInternalServerError, []byte(`{"success":false,"errors":[{"code":10001,"message":"Internal error"}],"messages":[],"result":null}`)
	}
	w.Header().Set("Content-Type", jsonType)
	w.WriteHeader(status)
	_, _ = w.Write(b)
}
