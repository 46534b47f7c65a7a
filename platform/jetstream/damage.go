package jetstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/duilie/duilie/platform"
)

// Damaged storage is reported, never silent. The engine says little of what it loses: a block
// file cut short or overwritten is rebuilt from what is left, the rest dropped, without a
// report; a stream whose metadata is damaged is not loaded at all, also without one (it only
// logs a warning, and its Lost data is set in few of these cases). So the embedded engine
// keeps its own account, beside the engine's files:
//
//   - at every clean close the holder writes each queue's message count and sequences to
//     state.json; at the next open, before anything runs, every message missing since then is
//     lost (nothing else can remove messages meanwhile: the directory was locked, and nothing
//     expires by itself);
//   - a stream directory the engine did not load is a queue that cannot be loaded; no queue
//     is created anew over it;
//   - the engine's own report (StreamState.Lost) is taken too, on a cluster as well.
//
// What is found is kept in lost.json until an operator deletes it, so every later open, serve
// and duilie queues reports it.

// Files of the account of damage.
const (
	stateFileName = "state.json" // each queue's count and sequences at the last clean close
	lostFileName  = "lost.json"  // what was found lost or unloadable
)

// mark is one queue's stream as a clean close left it.
type mark struct {
	Msgs    uint64      `json:"msgs"`
	First   uint64      `json:"first_seq"`
	Last    uint64      `json:"last_seq"`
	Deleted [][2]uint64 `json:"deleted,omitempty"` // sequences between First and Last no longer there, as ranges
	// Blocks are the stream's block files, by name: their size and modification time (Unix
	// ns). The next open checks the records of those that changed (records.go).
	Blocks map[string][2]int64 `json:"blocks,omitempty"`
}

// blockStamps are the size and modification time of each block file.
func blockStamps(blocks []blockFile) map[string][2]int64 {
	out := make(map[string][2]int64, len(blocks))
	for _, b := range blocks {
		out[filepath.Base(b.path)] = [2]int64{b.info.Size(), b.info.ModTime().UnixNano()}
	}
	return out
}

// changedBlocks are the block files whose stamp is not the one recorded.
func changedBlocks(blocks []blockFile, recorded map[string][2]int64) []blockFile {
	now := blockStamps(blocks)
	var out []blockFile
	for _, b := range blocks {
		name := filepath.Base(b.path)
		if was, ok := recorded[name]; !ok || was != now[name] {
			out = append(out, b)
		}
	}
	return out
}

// finding is one loss found in a queue, or the reason its stream cannot be loaded.
type finding struct {
	Lost       int64     `json:"lost,omitempty"`      // messages
	First      uint64    `json:"first_seq,omitempty"` // the lost messages lie within First–Last
	Last       uint64    `json:"last_seq,omitempty"`
	Unloadable string    `json:"unloadable,omitempty"` // why the stream is not loaded
	How        string    `json:"how"`                  // how it was found
	Found      time.Time `json:"found"`
	// Records are lost messages whose damaged records the engine still counts (records.go).
	Records []lostRecord `json:"records,omitempty"`
}

func (f finding) same(g finding) bool {
	return f.Lost == g.Lost && f.First == g.First && f.Last == g.Last && f.Unloadable == g.Unloadable && f.How == g.How
}

// describe says what a finding means, for QueueStats.Damage.
func (f finding) describe() string {
	if f.Unloadable != "" {
		return "its stored messages cannot be loaded (" + f.Unloadable + "); restore its files, or move its directory aside, then delete lost.json"
	}
	span := ""
	switch {
	case f.First > 0 && f.First == f.Last:
		span = fmt.Sprintf(" (sequence %d)", f.First)
	case f.First > 0:
		span = fmt.Sprintf(" (sequences %d–%d)", f.First, f.Last)
	}
	messages := "messages"
	if f.Lost == 1 {
		messages = "message"
	}
	return fmt.Sprintf("%d %s lost%s, %s, found %s", f.Lost, messages, span, f.How, f.Found.Format(time.RFC3339))
}

// damage is what a data directory's lost.json holds, by queue.
type damage map[string][]finding

// damageOf reads the account of damage in dir; a missing file is none.
func damageOf(dir string) (damage, error) {
	d := damage{}
	b, err := os.ReadFile(filepath.Join(dir, lostFileName))
	if errors.Is(err, fs.ErrNotExist) {
		return d, nil
	}
	if err == nil {
		err = json.Unmarshal(b, &d)
	}
	if err != nil {
		return nil, fmt.Errorf("jetstream: the account of lost messages in %s: %w", dir, err)
	}
	return d, nil
}

// add records f unless it is recorded already, and reports whether it was new.
func (d damage) add(queue string, f finding) bool {
	for _, g := range d[queue] {
		if g.same(f) {
			return false
		}
	}
	d[queue] = append(d[queue], f)
	return true
}

// stats fills in the damage columns of s from d. Lost messages whose damaged records the engine
// still counts, at sequences from first on (the stream's first now; 0 when unknown), are not
// ready or delayed.
func (d damage) stats(s *platform.QueueStats, first uint64) {
	var says []string
	for _, f := range d[s.Queue] {
		s.Lost += f.Lost
		says = append(says, f.describe())
		for _, r := range f.Records {
			switch {
			case first == 0 || r.Seq < first:
			case r.Ready:
				s.Ready = max(s.Ready-1, 0)
			default:
				s.Delayed = max(s.Delayed-1, 0)
			}
		}
	}
	if len(says) > 0 {
		s.Damage = strings.Join(says, "; ")
	}
}

// unloadable reports why queue's stream cannot be loaded, or "".
func (d damage) unloadable(queue string) string {
	for _, f := range d[queue] {
		if f.Unloadable != "" {
			return f.Unloadable
		}
	}
	return ""
}

// streamsDir is where the embedded engine keeps the streams of duilie's account.
func streamsDir(dataDir string) string {
	return filepath.Join(dataDir, "jetstream", "$G", "streams")
}

// takeAccount runs when the embedded engine has started on its directory, before anything else
// uses it: it compares what the engine loaded with the last clean close's state.json (which it
// then removes, so that a crash leaves none), and with the stream directories on disk, takes
// the engine's own reports, and records what is missing in lost.json.
func (p *Platform) takeAccount(ctx context.Context) error {
	dir := p.cfg.DataDir
	d, err := damageOf(dir)
	if err != nil {
		return err
	}
	var closed struct {
		Closed  time.Time       `json:"closed"`
		Streams map[string]mark `json:"streams"`
	}
	b, err := os.ReadFile(filepath.Join(dir, stateFileName))
	switch {
	case err == nil:
		if err := json.Unmarshal(b, &closed); err != nil {
			p.log.Warn("jetstream: the state of the last clean close is unreadable; losses since then cannot be counted", "err", err)
		}
		if err := os.Remove(filepath.Join(dir, stateFileName)); err != nil {
			return err
		}
	case !errors.Is(err, fs.ErrNotExist):
		return err
	}
	loaded, err := p.queueNames(ctx)
	if err != nil {
		return err
	}
	now := time.Now().UTC().Truncate(time.Second)
	changed := false
	type found struct {
		queue string
		f     finding
	}
	var fresh []found
	add := func(q string, f finding) {
		if d.add(q, f) {
			fresh, changed = append(fresh, found{q, f}), true
		}
	}
	entries, err := os.ReadDir(streamsDir(dir))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	for _, e := range entries {
		q, ok := strings.CutPrefix(e.Name(), streamPrefix)
		if !ok || !e.IsDir() || platform.CheckQueueName(q) != nil || slices.Contains(loaded, q) {
			continue
		}
		why := p.notLoaded(q)
		if why == "" {
			why = "the engine did not load " + filepath.Join(streamsDir(dir), e.Name())
		}
		add(q, finding{Unloadable: why, How: "its stream was not loaded", Found: now})
	}
	for _, q := range loaded {
		info, err := p.streamInfo(ctx, q)
		if err != nil {
			// Listed, but not readable: the engine keeps it offline (metadata it cannot use).
			add(q, finding{Unloadable: err.Error(), How: "its stream could not be read", Found: now})
			continue
		}
		// A queue that stopped being unloadable is no longer reported so.
		if kept := slices.DeleteFunc(slices.Clone(d[q]), func(f finding) bool { return f.Unloadable != "" }); len(kept) != len(d[q]) {
			d[q], changed = kept, true
		}
		engineLost := 0
		if f, ok := engineReport(info.State.Lost, now); ok {
			engineLost = int(f.Lost)
			add(q, f)
		}
		// What is missing since the last clean close, beyond what the engine itself reported.
		m, ok := closed.Streams[q]
		if !ok {
			continue
		}
		if info.State.Msgs+uint64(engineLost) < m.Msgs {
			f := finding{Lost: int64(m.Msgs - info.State.Msgs - uint64(engineLost)), How: "missing since duilie last stopped cleanly", Found: now}
			f.First, f.Last = newlyDeleted(m, info.State.Deleted)
			add(q, f)
		}
		// Records damaged in block files that changed since then.
		if m.Blocks != nil {
			f, ok, err := p.checkRecords(q, info, func(all []blockFile) []blockFile { return changedBlocks(all, m.Blocks) },
				"its stored records do not match their checksums")
			if err != nil {
				return err
			}
			if ok {
				f.Found = now
				add(q, f)
			}
		}
	}
	for q, m := range closed.Streams {
		if m.Msgs > 0 && !slices.Contains(loaded, q) && d.unloadable(q) == "" {
			add(q, finding{Lost: int64(m.Msgs), First: m.First, Last: m.Last,
				How: "its stream's files are gone since duilie last stopped cleanly", Found: now})
		}
	}
	for _, x := range fresh {
		p.log.Error("jetstream: queue damaged", "queue", x.queue, "lost", x.f.Lost, "damage", x.f.describe())
	}
	if !changed {
		return nil
	}
	return writeJSON(dir, lostFileName, d)
}

// localDamage is the account of damage of a store on this machine (the embedded engine, or
// the one a local serve runs); none for a cluster.
func (p *Platform) localDamage() (damage, error) {
	if p.cfg.URL != "" {
		return damage{}, nil
	}
	return damageOf(p.cfg.DataDir)
}

// engineReport is the finding of what the engine says a stream lost, if anything.
func engineReport(l *jetstream.LostStreamData, found time.Time) (finding, bool) {
	if l == nil || len(l.Msgs) == 0 {
		return finding{}, false
	}
	return finding{Lost: int64(len(l.Msgs)), First: slices.Min(l.Msgs), Last: slices.Max(l.Msgs),
		How: "reported lost by the engine", Found: found}, true
}

// newlyDeleted is the span of the sequences within m's that are gone now but were there at m:
// where lost messages lie.
func newlyDeleted(m mark, deleted []uint64) (first, last uint64) {
	for _, seq := range deleted {
		if seq < m.First || seq > m.Last || inRanges(m.Deleted, seq) {
			continue
		}
		if first == 0 {
			first = seq
		}
		last = seq
	}
	// Messages at the tail the engine forgot altogether leave no deletion behind.
	return first, last
}

func inRanges(rs [][2]uint64, seq uint64) bool {
	_, found := slices.BinarySearchFunc(rs, seq, func(r [2]uint64, s uint64) int {
		switch {
		case r[1] < s:
			return -1
		case r[0] > s:
			return 1
		}
		return 0
	})
	return found
}

// ranges compresses sorted sequences into ranges.
func ranges(seqs []uint64) [][2]uint64 {
	var out [][2]uint64
	for _, s := range seqs {
		if n := len(out); n > 0 && out[n-1][1]+1 == s {
			out[n-1][1] = s
			continue
		}
		out = append(out, [2]uint64{s, s})
	}
	return out
}

// streamInfo is the state of queue's stream with the sequences deleted from it. Its message
// count leaves out batch envelopes (batch.go), which are not messages: a damaged block file can
// give back one whose deletion it lost.
func (p *Platform) streamInfo(ctx context.Context, queue string) (*jetstream.StreamInfo, error) {
	st, err := p.js.Stream(ctx, streamName(queue))
	if err != nil {
		return nil, err
	}
	info, err := st.Info(ctx, jetstream.WithDeletedDetails(true), jetstream.WithSubjectFilter(envelopeSubject(queue)))
	if err != nil {
		return nil, err
	}
	info.State.Msgs -= min(info.State.Subjects[envelopeSubject(queue)], info.State.Msgs)
	return info, nil
}

// writeState records, at a clean close of the embedded engine, every queue's count and
// sequences, for the next open's account (takeAccount).
func (p *Platform) writeState(ctx context.Context) error {
	names, err := p.queueNames(ctx)
	if err != nil {
		return err
	}
	state := struct {
		Closed  time.Time       `json:"closed"`
		Streams map[string]mark `json:"streams"`
	}{time.Now().UTC(), map[string]mark{}}
	for _, q := range names {
		info, err := p.streamInfo(ctx, q)
		if err != nil {
			continue // not loaded as it is: the next open finds it so again
		}
		s := info.State
		deleted := slices.Clone(s.Deleted)
		slices.Sort(deleted)
		m := mark{Msgs: s.Msgs, First: s.FirstSeq, Last: s.LastSeq, Deleted: ranges(deleted)}
		if blocks, err := blockFiles(filepath.Join(streamsDir(p.cfg.DataDir), streamName(q))); err == nil {
			m.Blocks = blockStamps(blocks)
		}
		state.Streams[q] = m
	}
	return writeJSON(p.cfg.DataDir, stateFileName, state)
}

// unloaded remembers why the embedded engine said it did not load a stream (its warnings
// name the stream's directory), to explain an unloadable queue.
type unloaded struct {
	mu  sync.Mutex
	why map[string]string // by queue
}

// heard takes one of the engine's warnings.
func (u *unloaded) heard(line string) {
	_, rest, ok := strings.Cut(line, string(filepath.Separator)+"streams"+string(filepath.Separator)+streamPrefix)
	if !ok {
		return
	}
	q, _, _ := strings.Cut(rest, string(filepath.Separator))
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.why == nil {
		u.why = map[string]string{}
	}
	u.why[q] = strings.TrimSpace(line)
}

func (p *Platform) notLoaded(queue string) string {
	p.unloaded.mu.Lock()
	defer p.unloaded.mu.Unlock()
	return p.unloaded.why[queue]
}
