package duilie

import "github.com/duilie/duilie/internal/event"

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

// Handler is a program: the host calls it once per event. Returning an error or panicking fails
// the event (a queue event's messages are then delivered again); so does an abort, whatever the
// handler returns.
type Handler = event.Handler

// Exception is a catchable failure (豫言异常). Its Error is the spec's message, verbatim; a
// program may handle it and carry on:
//
//	var ex *duilie.Exception
//	if errors.As(err, &ex) { … }
type Exception = event.Exception

// Abort is a host abort. Its Error is the spec's message, verbatim. The event fails whatever
// the program does next, and every later call in the event returns the same abort; a program
// should return it.
type Abort = event.Abort

// The interface's catchable messages (SPEC §9).
const (
	msgEmptyBinding   = "队列绑定名不得为空"
	msgDelayRange     = "延迟秒数须在 0 至 43200 之间"
	msgBodyTooBig     = "消息体超过 128000 字节"
	msgSendFailed     = "队列发送失败："
	msgBatchSendFail  = "队列批量发送失败："
	msgNotQueueEvent  = "当前事件不是队列事件"
	msgIndexRange     = "队列消息序号越界"
	msgBodyNotJSON    = "队列消息正文不是 JSON 值：序号 "
	abortDeepResult   = "宿主结果嵌套过深"
	msgBatchTooBig    = "批量消息文字超过 1 MiB"
	msgBatchNotArray  = "批量消息须为 JSON 数组"
	msgBatchEmpty     = "批量消息不得为空"
	msgBatchTooMany   = "批量消息不得超过 100 条"
	msgItemNotObject  = "批量消息的每一项须为 JSON 对象"
	msgItemNoBody     = "批量消息项缺少 body"
	msgItemExtraKey   = "批量消息项只允许 body 与 delaySeconds 两个字段"
	msgItemDelay      = "批量消息项的 delaySeconds 须为 0 至 43200 的整数"
	msgItemBodyTooBig = "批量消息体超过 128000 字节"
	msgBatchSumTooBig = "批量消息体合计超过 256000 字节"
)

func exception(msg string) error { return &Exception{Message: msg} }
