package main

import (
	"context"
	"fmt"
	"strings"

	s3sink "github.com/filesink/filesink/committer/s3"
	"github.com/filesink/filesink/filesink"
	"github.com/filesink/filesink/recovery"
)

// What the checkpoint records say of an upload or a tail object.
const (
	refReferenced   = iota // a retained record references it
	refUnreferenced        // the records are all readable and none does
	refUnknown             // the records cannot tell
)

// partRef is one reference of a retained checkpoint record to staging data.
type partRef struct {
	lane        string // group mode: the lane ("orders/3") whose state holds the record; "" for one process
	checkpoint  uint64
	participant string
	pending     bool // a committable waiting for its commit; false: an in-progress part
	stats       *filesink.PartStats
}

// laneRecord is what a group-mode job's lane state holds: the lane's
// newest checkpoint record, if it decided one.
type laneRecord struct {
	lane       string // "orders/3"
	checkpoint uint64 // 0: none yet
}

// stagingRefs says which uploads and tail objects of an S3 sink the
// retained checkpoint records at a state location reference: those of a
// one-process job, or the newest record of each lane of a group-mode job.
type stagingRefs struct {
	state   string
	ids     []uint64                 // the records read
	lanes   []laneRecord             // group mode: the lane states read (ids is empty)
	corrupt []*recovery.CorruptError // the records that could not be read
	err     error                    // the records could not be read (or do not describe this sink)
	uploads map[string][]partRef     // by upload id
	tails   map[string][]partRef     // by tail object key
}

// readStagingRefs reads the retained checkpoint records at stateURI, or
// for a group-mode job (an S3 state without job-wide records, with lane
// states) the newest record of every lane, and maps what their filesink
// participants reference in be. It never fails: what it could not read is
// in err and corrupt, and makes the uploads and tail objects that no
// record read references unknown.
func readStagingRefs(ctx context.Context, stateURI string, s3f *s3Flags, t *target, be *s3sink.Backend) *stagingRefs {
	r := &stagingRefs{state: stateURI, uploads: map[string][]partRef{}, tails: map[string][]partRef{}}
	store, err := openStore(ctx, stateURI, s3f, t.client, false, nil)
	if err != nil {
		r.err = err
		return r
	}
	recs, bad, err := recovery.Readable(ctx, store)
	if err != nil {
		r.err = err
		return r
	}
	if ls, ok := store.(*s3sink.Store); ok && len(recs)+len(bad) == 0 {
		heads, err := s3sink.ListLanes(ctx, ls)
		if err != nil {
			r.err = err
			return r
		}
		if len(heads) > 0 {
			r.readLanes(heads, be)
			return r
		}
	}
	r.corrupt = bad
	for _, c := range recs {
		r.ids = append(r.ids, c.ID)
	}
	r.add(recs, "", be)
	return r
}

// readLanes maps what the lane states heads reference.
func (r *stagingRefs) readLanes(heads []*s3sink.LaneHead, be *s3sink.Backend) {
	for _, h := range heads {
		lr := laneRecord{lane: fmt.Sprintf("%s/%d", h.Topic, h.Partition)}
		if c := h.Checkpoint; c != nil && len(c.Participants) > 0 {
			lr.checkpoint = c.ID
			if !r.add([]*recovery.Checkpoint{c}, lr.lane, be) {
				return
			}
		}
		r.lanes = append(r.lanes, lr)
	}
}

// add maps what the filesink participants of recs reference in be, as
// held by lane ("" for one process). It reports false, and sets r.err, if
// a record does not describe this sink.
func (r *stagingRefs) add(recs []*recovery.Checkpoint, lane string, be *s3sink.Backend) bool {
	prs, err := filesink.PartRefs(recs)
	if err != nil {
		r.err = err
		return false
	}
	for _, p := range prs {
		if p.DeadLetter {
			continue // the dead-letter output's uploads are not listed
		}
		st, err := be.Staged(p.Part)
		if err != nil {
			r.err = fmt.Errorf("%s (%s) references a part file that is not this sink's (is %s this job's state?): %w",
				refName(lane, p.Checkpoint), p.Participant, r.state, err)
			return false
		}
		ref := partRef{lane: lane, checkpoint: p.Checkpoint, participant: p.Participant, pending: p.Pending, stats: p.Stats}
		r.uploads[st.UploadID] = append(r.uploads[st.UploadID], ref)
		for _, k := range st.Tails {
			r.tails[k] = append(r.tails[k], ref)
		}
	}
	return true
}

// refName names a checkpoint: "checkpoint 12", or "lane orders/3
// checkpoint 12" for a lane's.
func refName(lane string, id uint64) string {
	if lane == "" {
		return fmt.Sprintf("checkpoint %d", id)
	}
	return fmt.Sprintf("lane %s checkpoint %d", lane, id)
}

// unknown says why the records cannot tell that an upload they do not
// reference is unneeded ("" when they can), briefly if short is set.
func (r *stagingRefs) unknown(short bool) string {
	switch {
	case r.err != nil && short:
		return "state unreadable"
	case r.err != nil:
		return fmt.Sprintf("cannot read the checkpoint records in %s: %s", r.state, oneLine(r.err.Error()))
	case len(r.corrupt) > 0 && short:
		return "corrupt checkpoint record"
	case len(r.corrupt) > 0:
		return fmt.Sprintf("corrupt checkpoint record %s may reference it", r.corrupt[len(r.corrupt)-1].File)
	case len(r.lanes) > 0:
		return "" // every lane's newest record is read
	case len(r.ids) == 0 && short:
		return "no checkpoint record"
	case len(r.ids) == 0:
		return fmt.Sprintf("no checkpoint record in %s (a job that keeps its checkpoints elsewhere needs --state)", r.state)
	}
	return ""
}

// summary is the first line of a listing: which records were read.
func (r *stagingRefs) summary() string {
	if why := r.unknown(false); why != "" && (r.err != nil || len(r.ids) == 0) {
		return why + ": uploads and tail objects are taken as referenced"
	}
	if len(r.lanes) > 0 {
		lanes := make([]string, len(r.lanes))
		for i, l := range r.lanes {
			lanes[i] = l.lane + " checkpoint " + fmt.Sprint(l.checkpoint)
			if l.checkpoint == 0 {
				lanes[i] = l.lane + " (no checkpoint yet)"
			}
		}
		return fmt.Sprintf("group mode: the newest checkpoint record of each of the %d lane(s) in %s: %s", len(r.lanes), r.state, strings.Join(lanes, ", "))
	}
	ids := make([]string, len(r.ids))
	for i, id := range r.ids {
		ids[i] = fmt.Sprint(id)
	}
	s := fmt.Sprintf("checkpoint records in %s: %s", r.state, strings.Join(ids, ", "))
	for _, c := range r.corrupt {
		s += fmt.Sprintf("; corrupt: %s (%s)", c.File, c.Reason)
	}
	return s
}

// describe says which checkpoints refs are ("referenced by checkpoints 11,
// 12 (filesink/0, in progress)"), or why there are none, and of which
// kind that is.
func (r *stagingRefs) describe(refs []partRef) (string, int) {
	if len(refs) == 0 {
		if why := r.unknown(true); why != "" {
			return "unknown: " + why, refUnknown
		}
		return "unreferenced", refUnreferenced
	}
	return "referenced by " + refsText(refs), refReferenced
}

// needs says whether the staging data that refs reference may be needed,
// and why, for a message.
func (r *stagingRefs) needs(refs []partRef) (string, bool) {
	if len(refs) > 0 {
		return fmt.Sprintf("referenced by %s in %s", refsText(refs), r.state), true
	}
	if why := r.unknown(false); why != "" {
		return "the checkpoint records cannot tell whether it is needed: " + why, true
	}
	return "", false
}

// refsText groups refs by lane, participant and kind: "checkpoints 11, 12
// (filesink/0, in progress); checkpoint 12 (filesink/0, pending commit)",
// or in group mode "lane orders/3 checkpoint 12 (filesink/0, pending
// commit)".
func refsText(refs []partRef) string {
	type group struct {
		lane        string
		participant string
		pending     bool
	}
	var order []group
	ids := map[group][]string{}
	for _, ref := range refs {
		g := group{ref.lane, ref.participant, ref.pending}
		if _, ok := ids[g]; !ok {
			order = append(order, g)
		}
		ids[g] = append(ids[g], fmt.Sprint(ref.checkpoint))
	}
	parts := make([]string, len(order))
	for i, g := range order {
		word := "checkpoint"
		if len(ids[g]) > 1 {
			word = "checkpoints"
		}
		if g.lane != "" {
			word = "lane " + g.lane + " " + word
		}
		kind := "in progress"
		if g.pending {
			kind = "pending commit"
		}
		parts[i] = fmt.Sprintf("%s %s (%s, %s)", word, strings.Join(ids[g], ", "), g.participant, kind)
	}
	return strings.Join(parts, "; ")
}

// lossText says what losing the part file that refs reference loses: its
// records as the newest reference has them ("its 1200 records: gen 0-1199"),
// or what is known when the records do not say.
func (r *stagingRefs) lossText(refs []partRef) string {
	var newest *partRef
	for i := range refs {
		if newest == nil || refs[i].checkpoint > newest.checkpoint {
			newest = &refs[i]
		}
	}
	switch {
	case newest == nil:
		return "the part file's records are lost if a checkpoint references it"
	case newest.stats == nil:
		return fmt.Sprintf("loses the records of the part file as of checkpoint %d (that record does not count them)", newest.checkpoint)
	}
	st := newest.stats
	s := fmt.Sprintf("loses the part file's %d records (%d bytes) as of checkpoint %d", st.Records, st.Size, newest.checkpoint)
	var ranges []string
	for _, sr := range st.Sources {
		ranges = append(ranges, fmt.Sprintf("%s %d-%d", sr.Input, sr.First, sr.Last))
	}
	if len(ranges) > 3 {
		ranges = append(ranges[:3], fmt.Sprintf("and %d more inputs", len(st.Sources)-3))
	}
	if len(ranges) > 0 {
		s += ": " + strings.Join(ranges, ", ")
	}
	return s
}
