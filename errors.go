package duilie

import (
	"errors"
	"fmt"

	"github.com/duilie/duilie/internal/event"
)

// Event is the current event, which every function takes. It carries its own context, as
// http.Request does; Kind reports whether it is a queue or a fetch event (读取入站事件种类).
type Event = event.Event

// Kind is an event's kind: "queue" or "fetch".
type Kind = event.Kind

// Event kinds.
const (
	QueueEvent = event.QueueEvent
	FetchEvent = event.FetchEvent
)

// Exception is a catchable failure (豫言异常). Its Error is the spec's message, verbatim; a
// program may handle it and carry on. Each of the interface's exceptions is one of the Err…
// values below, told apart with errors.Is, which holds whatever follows the message's fixed part
// (the platform's message after 队列发送失败：, the index after 队列消息正文不是 JSON 值：序号 ):
//
//	if errors.Is(err, duilie.ErrBodyTooLarge) { … }
//	var ex *duilie.Exception
//	if errors.As(err, &ex) { log.Print(ex.Code, ex.Message) }
type Exception struct {
	Message string // the spec's message, verbatim: all a program in another language sees
	Code    string // a stable name of the exception, such as "body_too_large"
	Gloss   string // what it means, in English, for people
	// Detail says, for people and in English, where the check failed: the byte of a syntax
	// error, the index of a batch item, a size. "" when there is nothing to add.
	Detail string
}

func (e *Exception) Error() string { return e.Message }

// Is reports whether target is an exception of the same code.
func (e *Exception) Is(target error) bool {
	t, ok := target.(*Exception)
	return ok && t.Code != "" && t.Code == e.Code
}

// with returns an exception of e's code whose message is e's followed by suffix, and whose
// detail is detail.
func (e *Exception) with(suffix, detail string) *Exception {
	x := *e
	x.Message += suffix
	x.Detail = detail
	return &x
}

// detailed returns an exception of e's code and message with detail.
func (e *Exception) detailed(format string, a ...any) *Exception {
	return e.with("", fmt.Sprintf(format, a...))
}

// The interface's exceptions (SPEC §9), in the order the spec lists them.
var (
	ErrEmptyBinding = &Exception{"队列绑定名不得为空", "empty_binding", "the binding name is empty", ""}
	ErrDelayRange   = &Exception{"延迟秒数须在 0 至 43200 之间", "delay_out_of_range", "the delay must be 0 to 43200 seconds", ""}
	ErrBodyTooLarge = &Exception{"消息体超过 128000 字节", "body_too_large", "the message body is over 128000 bytes", ""}
	ErrBodyNotJSON  = &Exception{"消息体不是有效的 JSON 文字", "body_not_json", "the message body is not a JSON text", ""}
	ErrBodyTooDeep  = &Exception{"消息体嵌套超过 24 层", "body_too_deep", "the message body is nested deeper than 24 levels", ""}
	ErrBodyHostOnly = &Exception{"消息体含有不属于 JSON 的值或宿主专用记号", "body_not_json_value", "the message body holds a number JSON cannot carry (such as 1e999) or a host marker ($句柄, $未定义, $大整数, $数字)", ""}
	// ErrSendFailed is every 队列发送失败：<the platform's message>.
	ErrSendFailed          = &Exception{"队列发送失败：", "send_failed", "the platform refused the message", ""}
	ErrBatchTooLarge       = &Exception{"批量消息文字超过 1 MiB", "batch_too_large", "the batch text is over 1 MiB", ""}
	ErrBatchNotJSON        = &Exception{"批量消息不是有效的 JSON 文字", "batch_not_json", "the batch is not a JSON text", ""}
	ErrBatchTooDeep        = &Exception{"批量消息嵌套超过 24 层", "batch_too_deep", "the batch is nested deeper than a body may be (24 levels)", ""}
	ErrBatchHostOnly       = &Exception{"批量消息含有不属于 JSON 的值或宿主专用记号", "batch_not_json_value", "the batch holds a number JSON cannot carry (such as 1e999) or a host marker ($句柄, $未定义, $大整数, $数字)", ""}
	ErrBatchNotArray       = &Exception{"批量消息须为 JSON 数组", "batch_not_array", "the batch must be a JSON array", ""}
	ErrBatchEmpty          = &Exception{"批量消息不得为空", "batch_empty", "the batch is empty", ""}
	ErrBatchTooMany        = &Exception{"批量消息不得超过 100 条", "batch_too_many", "the batch has more than 100 items", ""}
	ErrItemNotObject       = &Exception{"批量消息的每一项须为 JSON 对象", "item_not_object", "a batch item is not a JSON object", ""}
	ErrItemNoBody          = &Exception{"批量消息项缺少 body", "item_no_body", "a batch item has no body", ""}
	ErrItemExtraKey        = &Exception{"批量消息项只允许 body 与 delaySeconds 两个字段", "item_extra_key", "a batch item may have body and delaySeconds only", ""}
	ErrItemDelay           = &Exception{"批量消息项的 delaySeconds 须为 0 至 43200 的整数", "item_delay", "a batch item's delaySeconds must be an integer from 0 to 43200", ""}
	ErrItemBodyTooLarge    = &Exception{"批量消息体超过 128000 字节", "item_body_too_large", "a batch item's body is over 128000 bytes", ""}
	ErrBatchBodiesTooLarge = &Exception{"批量消息体合计超过 256000 字节", "batch_bodies_too_large", "the batch's bodies are over 256000 bytes in all", ""}
	// ErrBatchSendFailed is every 队列批量发送失败：<the platform's message>.
	ErrBatchSendFailed = &Exception{"队列批量发送失败：", "batch_send_failed", "the platform refused the batch", ""}
	ErrNotQueueEvent   = &Exception{"当前事件不是队列事件", "not_queue_event", "this is not a queue event: there is no batch to read, ack or retry", ""}
	ErrIndexRange      = &Exception{"队列消息序号越界", "index_out_of_range", "the message index is outside the batch", ""}
	// ErrMessageNotJSON is every 队列消息正文不是 JSON 值：序号 <i>.
	ErrMessageNotJSON = &Exception{"队列消息正文不是 JSON 值：序号 ", "message_not_json", "a message's body is not a JSON value", ""}
)

// Abort is a host abort. Its Error is the spec's message, verbatim. The event fails whatever
// the program does next, and every later call in the event returns the same abort; a program
// should return it. Each of the host's aborts is one of the Err… values below, told apart with
// errors.Is, which holds whatever names follow the reason's fixed part.
type Abort = event.Abort

// The host's aborts (SPEC §9).
var (
	// ErrNotPermitted is every 未授权的QUEUE绑定：<binding>: the permissions do not list it.
	ErrNotPermitted = event.NotPermitted
	// ErrNoBinding is every 绑定不存在：<binding>: permitted, but the deployment does not
	// configure it.
	ErrNoBinding = event.NoBinding
	// ErrTimeLimit is 执行超过时限: the event ran past its time limit, or the host halted it.
	ErrTimeLimit = event.TimeLimit
	// ErrResultTooDeep is 宿主结果嵌套过深: a message body nested deeper than the host carries.
	ErrResultTooDeep = event.DeepResult
	// ErrBadBridgeCall is every 桥接调用无效：<what is wrong>: a malformed bridge call.
	ErrBadBridgeCall = event.BadCall
)

// Explain says, for people, what an exception or abort in err is: its stable code, an English
// gloss and the detail of where it failed (the byte of a syntax error, a batch item's index,
// the bindings that are permitted). It reports false for any other error. What a program sees
// is the spec's message alone; duilie's commands, log lines and dashboard print these beside it.
func Explain(err error) (code, gloss, detail string, ok bool) {
	var ex *Exception
	var ab *Abort
	switch {
	case errors.As(err, &ab):
		return ab.Code, ab.Gloss, ab.Detail, ab.Code != ""
	case errors.As(err, &ex):
		return ex.Code, ex.Gloss, ex.Detail, ex.Code != ""
	}
	return "", "", "", false
}
