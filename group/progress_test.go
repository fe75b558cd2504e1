package group

import (
	"testing"

	"github.com/filesink/filesink/committer"
	"github.com/filesink/filesink/pipeline"
)

// TestLaneCounts: the process's totals add up every lane run's, whether
// it ends with a final checkpoint or is cut after some; a lane's records
// count as committed when the checkpoint whose barrier followed them is
// decided, never before, and a checkpoint begun and never decided commits
// nothing. The totals never go back, and Lanes follows the runs.
func TestLaneCounts(t *testing.T) {
	var reports []Progress
	p := &progress{report: func(pr Progress) { reports = append(reports, pr) }}

	a, b := newLaneCount(p), newLaneCount(p)
	a.running(1)
	b.running(1)
	ea, eb := a.events(), b.events()

	// Lane a: 100 records, checkpoint 1 (decided and completed), 50 more,
	// checkpoint 2 begun and never decided: the run is cut there.
	ea.Progress(pipeline.Progress{Records: 60, Bytes: 600})
	ea.Progress(pipeline.Progress{Records: 100, Bytes: 1000})
	ea.CheckpointBegun(committer.CheckpointBegunInfo{ID: 1})
	ea.Progress(pipeline.Progress{Records: 150, Bytes: 1500}) // read while checkpoint 1 completes
	ea.Decided(committer.DecidedInfo{ID: 1})
	ea.Progress(pipeline.Progress{Records: 150, Bytes: 1500, Checkpoints: 1, Checkpoint: 1})
	ea.CheckpointBegun(committer.CheckpointBegunInfo{ID: 2})
	a.running(-1)

	// Lane b, restored at checkpoint 7: 30 records, a final checkpoint 8.
	eb.Progress(pipeline.Progress{Records: 30, Bytes: 90})
	eb.CheckpointBegun(committer.CheckpointBegunInfo{ID: 8, Final: true})
	eb.Decided(committer.DecidedInfo{ID: 8})
	eb.Progress(pipeline.Progress{Records: 30, Bytes: 90, Checkpoints: 1, Checkpoint: 8, Done: true})
	b.running(-1)

	want := Progress{Records: 180, Bytes: 1590, Committed: 130, Checkpoints: 2, Lanes: 0}
	if got := p.get(); got != want {
		t.Errorf("totals %+v, want %+v", got, want)
	}
	for i := 1; i < len(reports); i++ {
		x, y := reports[i-1], reports[i]
		if y.Records < x.Records || y.Bytes < x.Bytes || y.Committed < x.Committed || y.Checkpoints < x.Checkpoints {
			t.Errorf("report %d went back: %+v after %+v", i, y, x)
		}
	}
	if len(reports) == 0 || reports[len(reports)-1] != want {
		t.Errorf("the last report is not the totals: %+v", reports)
	}
	if maxLanes := max(reports[0].Lanes, reports[1].Lanes); maxLanes != 2 {
		t.Errorf("two lanes running, reported %d", maxLanes)
	}
}
