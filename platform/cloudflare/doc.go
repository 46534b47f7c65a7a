// Package cloudflare is the platform driver for Cloudflare Queues, reached from any host over
// Cloudflare's REST API (SPEC §10): a producer pushes (Send) and bulk-pushes (SendBatch), and a
// consumer is an HTTP pull consumer that pulls batches, leased for the host's whole ack wait,
// and settles each batch with one ack call. Cloudflare counts attempts and applies its own
// consumers' max_retries, retry_delay and dead-letter queue (platform.Capabilities.Retries), so
// the host never dead-letters or drops a message here.
//
// In duilie.toml:
//
//	[platform]
//	kind = "cloudflare"
//	account_id = "0123456789abcdef0123456789abcdef"
//	api_token_env = "CLOUDFLARE_API_TOKEN"   # the variable that holds the token
//	base_url = "http://127.0.0.1:8790/client/v4" # optional: a duilie serving Cloudflare's API
//
// # Differences from duilie's own platforms
//
//   - Queues are Cloudflare's: they must exist, and each consumed queue needs an HTTP pull
//     consumer. Queue names are looked up once (listing the account's queues) and cached.
//   - Long polling does not exist: an idle queue is pulled again after a pause that doubles from
//     MinPullInterval to DefaultMaxPullInterval (5 s), and a pull that brings messages makes the
//     next one immediate.
//   - InProgress does nothing: Cloudflare cannot extend a lease.
//   - A refused bulk push may have been partly enqueued: that is Cloudflare's business.
//   - A failed request's text is Cloudflare's with its code, such as
//     "Queue is overloaded. Please back off. (10250)".
//   - Stats reports each queue's backlog (QueueStats.Backlog) and pause, as Cloudflare reports
//     them, not ready, delayed and in-flight counts it does not have. Pause, Resume and Purge are
//     Cloudflare's; the operations Cloudflare has no API for (listing, reading, deleting and
//     moving single messages, deleting queues) fail with errors.ErrUnsupported.
//
// It uses github.com/cloudflare/cloudflare-go/v6 with the SDK's own retries off: 429 and 10250
// are waited out as Retry-After says, 5xx backed off, and a bad token (403, 10106) or a queue that
// is gone (10104) stops the consumer (platform.Permanent).
package cloudflare
