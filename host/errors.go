package host

// Exception is a catchable failure (豫言异常): the program may handle it and carry on. Its Error
// is the spec's message, verbatim.
type Exception struct {
	Message string
}

func (e *Exception) Error() string { return e.Message }

// Abort is a host abort: the program cannot recover from it, and its event fails with this
// reason whatever the program does next (SPEC §8.3). Its Error is the spec's message, verbatim.
type Abort struct {
	Reason string
}

func (a *Abort) Error() string { return a.Reason }

// Abort reasons the host itself raises (SPEC §9).
const (
	abortNotPermitted = "未授权的QUEUE绑定："
	abortNoBinding    = "绑定不存在："
	AbortTimeLimit    = "执行超过时限"
)
