package jetstream

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/minio/highwayhash"
	"github.com/nats-io/nats.go/jetstream"
)

// Damage inside a record. The engine checks a stored message's checksum only when it reads the
// message, and then skips a message that fails without a word: the consumer never delivers it,
// a get by its sequence answers "not found", a delete fails, and the stream goes on counting
// it, so it stays ready for ever. duilie reads the records of a stream's block files itself,
// as the engine writes them (nats-server v2.15.2, filestore.go, uncompressed and unencrypted,
// which duilie's streams are), and checks every checksum:
//
//	record   = length(4, bit 31: has headers) sequence(8) time(8) subject length(2) subject
//	           [headers length(4) headers] payload checksum(8)
//	checksum = HighwayHash-64, keyed with SHA-256("<stream>-<block index>"), of
//	           sequence ‖ time ‖ subject ‖ headers ‖ payload
//
// It does so at open for the block files that changed since the last clean close (state.json
// records each one's size and modification time), and in a serving process whenever the
// stream's first message cannot be read (checkFirst), which is where a skipped message ends up
// once everything before it is consumed. TestDamageRecord pins the format to the engine.

// Record header layout (filestore.go).
const (
	recordHeaderSize = 22
	recordHashSize   = 8
	recordHeadersBit = 1 << 31 // in the length
	recordErasedBit  = 1 << 63 // in the sequence
	recordTombBit    = 1 << 62 // in the sequence: a deletion marker, not a message
	recordMaxLen     = 32 << 20
)

// badRecord is a record of a block file whose checksum does not match, or the place from which
// a block file cannot be read at all.
type badRecord struct {
	seq     uint64 // the record's sequence as written (unreliable when damaged: see blockDamage)
	subject string // its subject as written, when it is one of the stream's
	offset  int64
	cut     bool // the records from offset on cannot be told apart: the rest of the block is lost
}

// blockFile is one of a stream's block files.
type blockFile struct {
	index uint32
	path  string
	info  fs.FileInfo
}

// blockFiles lists a stream directory's block files, by index.
func blockFiles(streamDir string) ([]blockFile, error) {
	entries, err := os.ReadDir(filepath.Join(streamDir, "msgs"))
	if err != nil {
		return nil, err
	}
	var out []blockFile
	for _, e := range entries {
		n, ok := strings.CutSuffix(e.Name(), ".blk")
		i, err := strconv.ParseUint(n, 10, 32)
		if !ok || err != nil || !e.Type().IsRegular() {
			continue
		}
		info, err := e.Info()
		if err != nil {
			continue // removed meanwhile
		}
		out = append(out, blockFile{uint32(i), filepath.Join(streamDir, "msgs", e.Name()), info})
	}
	slices.SortFunc(out, func(a, b blockFile) int { return int(a.index) - int(b.index) })
	return out, nil
}

// checkBlock reads one block file of stream and returns its damaged records, the sequence of its
// last good record (0 if none) and the sequence of its first record (0 if none could be read).
func checkBlock(stream string, b blockFile) (bad []badRecord, first, lastGood uint64, err error) {
	buf, err := os.ReadFile(b.path)
	if err != nil {
		return nil, 0, 0, err
	}
	key := sha256.Sum256([]byte(stream + "-" + strconv.FormatUint(uint64(b.index), 10)))
	hh, err := highwayhash.NewDigest64(key[:])
	if err != nil {
		return nil, 0, 0, err
	}
	le := binary.LittleEndian
	var sum [highwayhash.Size64]byte
	for off := 0; off < len(buf); {
		if off+recordHeaderSize+recordHashSize > len(buf) {
			return append(bad, badRecord{offset: int64(off), cut: true}), first, lastGood, nil
		}
		hdr := buf[off : off+recordHeaderSize]
		rl := le.Uint32(hdr[0:])
		headers := rl&recordHeadersBit != 0
		rl &^= recordHeadersBit
		slen := int(le.Uint16(hdr[20:]))
		dlen := int(rl) - recordHeaderSize
		shlen := slen
		if headers {
			shlen += 4
		}
		if dlen < recordHashSize || shlen > dlen-recordHashSize || rl > recordMaxLen || off+int(rl) > len(buf) {
			return append(bad, badRecord{offset: int64(off), cut: true}), first, lastGood, nil
		}
		data := buf[off+recordHeaderSize : off+int(rl)]
		hh.Reset()
		hh.Write(hdr[4:20])
		hh.Write(data[:slen])
		if headers {
			hh.Write(data[slen+4 : dlen-recordHashSize])
		} else {
			hh.Write(data[slen : dlen-recordHashSize])
		}
		seq := le.Uint64(hdr[4:]) &^ (recordErasedBit | recordTombBit)
		if first == 0 && le.Uint64(hdr[4:])&recordTombBit == 0 {
			first = seq
		}
		if !bytes.Equal(hh.Sum(sum[:0]), data[dlen-recordHashSize:]) {
			r := badRecord{seq: seq, offset: int64(off)}
			if subj := string(data[:slen]); strings.HasPrefix(subj, subjectPrefix) {
				r.subject = subj
			}
			bad = append(bad, r)
		} else if le.Uint64(hdr[4:])&recordTombBit == 0 {
			lastGood = seq
		}
		off += int(rl)
	}
	return bad, first, lastGood, nil
}

// live tells whether a stream sequence is one of its messages now.
type live struct {
	first, last uint64
	deleted     map[uint64]bool
}

func (l live) has(seq uint64) bool {
	return seq >= l.first && seq <= l.last && !l.deleted[seq]
}

// lostRecord is a message whose stored record is damaged: it is still counted by the engine,
// in the state its subject says, but can never be read.
type lostRecord struct {
	Seq   uint64 `json:"seq"`
	Ready bool   `json:"ready,omitempty"` // counted as ready (else as delayed)
}

// recordDamage checks the given block files of queue's stream and returns the finding for its
// damaged records that are still messages of the stream (a damaged record of a deleted message
// is no loss), with how; ok is false when there are none.
func recordDamage(queue string, blocks []blockFile, all []blockFile, l live, how string) (f finding, ok bool, err error) {
	stream := streamName(queue)
	var lost []lostRecord
	var where []string
	for _, b := range blocks {
		bad, _, lastGood, err := checkBlock(stream, b)
		if err != nil {
			return f, false, err
		}
		for _, r := range bad {
			n := len(lost)
			if r.cut {
				// The rest of the block: every message after the last good record up to the
				// next block's first.
				end := l.last
				if i := slices.IndexFunc(all, func(x blockFile) bool { return x.index > b.index }); i >= 0 {
					if _, next, _, err := checkBlock(stream, all[i]); err == nil && next > 0 {
						end = next - 1
					}
				}
				for seq := max(lastGood+1, l.first); seq <= end && len(lost) < maxLostRecords; seq++ {
					if l.has(seq) {
						lost = append(lost, lostRecord{Seq: seq, Ready: true})
					}
				}
			} else if l.has(r.seq) && !slices.ContainsFunc(lost, func(x lostRecord) bool { return x.Seq == r.seq }) {
				lost = append(lost, lostRecord{Seq: r.seq, Ready: r.subject == "" || r.subject == readySubject(queue)})
			}
			if len(lost) > n {
				where = append(where, fmt.Sprintf("%s at byte %d", filepath.Base(b.path), r.offset))
			}
		}
	}
	if len(lost) == 0 {
		return f, false, nil
	}
	slices.SortFunc(lost, func(a, b lostRecord) int { return cmp.Compare(a.Seq, b.Seq) })
	if len(where) > 3 {
		where = append(where[:3], "…")
	}
	return finding{Lost: int64(len(lost)), First: lost[0].Seq, Last: lost[len(lost)-1].Seq, Records: lost,
		How: how + " (" + strings.Join(where, ", ") + ")"}, true, nil
}

// maxLostRecords bounds the damaged records named in one finding.
const maxLostRecords = 100000

// checkRecords checks the records of the block files of queue's stream that pick chooses from
// all of them, against the stream's state in info (with its deleted sequences).
func (p *Platform) checkRecords(queue string, info *jetstream.StreamInfo, pick func([]blockFile) []blockFile, how string) (finding, bool, error) {
	dir := filepath.Join(streamsDir(p.cfg.DataDir), streamName(queue))
	all, err := blockFiles(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return finding{}, false, nil
	}
	if err != nil {
		return finding{}, false, err
	}
	l := live{first: info.State.FirstSeq, last: info.State.LastSeq, deleted: make(map[uint64]bool, len(info.State.Deleted))}
	for _, seq := range info.State.Deleted {
		l.deleted[seq] = true
	}
	return recordDamage(queue, pick(all), all, l, how)
}

// checkFirstMessages runs in a serving process that runs the embedded engine, every sweep: a
// queue's first stored message that the engine cannot read is a damaged record it skipped (the
// consumer went past it; everything before it is consumed). The stream's block files are then
// checked, and what is found is recorded in lost.json and logged at ERROR, as at open.
func (p *Platform) checkFirstMessages(ctx context.Context) error {
	if p.srv == nil {
		return nil
	}
	names, err := p.queueNames(ctx)
	if err != nil {
		return err
	}
	var errs []error
	for _, q := range names {
		if err := p.checkFirstMessage(ctx, q); err != nil {
			errs = append(errs, fmt.Errorf("queue %s: %w", q, err))
		}
	}
	return errors.Join(errs...)
}

func (p *Platform) checkFirstMessage(ctx context.Context, queue string) error {
	st, err := p.js.Stream(ctx, streamName(queue))
	if err != nil {
		return err
	}
	first := st.CachedInfo().State.FirstSeq
	if st.CachedInfo().State.Msgs == 0 {
		return nil
	}
	if _, err := st.GetMsg(ctx, first); !errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil // read, or not for want of it: another sweep will look again
	}
	d, err := damageOf(p.cfg.DataDir)
	if err != nil {
		return err
	}
	for _, f := range d[queue] {
		if slices.ContainsFunc(f.Records, func(r lostRecord) bool { return r.Seq == first }) {
			return nil // known
		}
	}
	info, err := p.streamInfo(ctx, queue)
	if err != nil || info.State.FirstSeq != first {
		return err // consumed meanwhile: it was there after all
	}
	f, ok, err := p.checkRecords(queue, info, func(all []blockFile) []blockFile { return all },
		"its stored records do not match their checksums, found when its first message could not be read")
	if err != nil || !ok {
		return err
	}
	f.Found = time.Now().UTC().Truncate(time.Second)
	if !d.add(queue, f) {
		return nil
	}
	p.log.Error("jetstream: queue damaged", "queue", queue, "lost", f.Lost, "damage", f.describe())
	return writeJSON(p.cfg.DataDir, lostFileName, d)
}
