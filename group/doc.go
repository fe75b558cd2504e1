// Package group runs a job in group mode: many identical processes share
// the partitions of Kafka topics through a consumer group and write to one
// S3 output, exactly once, through rebalances, crashes and paused
// processes that wake after their partitions moved (zombies).
//
// The consumer group (source/kafka's Group, franz-go's cooperative-sticky
// balancer) decides which process should own a partition. It never decides
// what is published: each assigned partition is a lane, a pipeline of its
// own (pipeline.Run with one subtask) whose checkpoint store is the lane's
// state object (committer/s3's LaneStore). A lane checkpoint is decided only
// by a conditional write of that object, and every owner change raises its
// owner epoch, so a process that lost a lane can never decide for it again,
// whatever it believes about the group.
//
// Parts stay open across a lane's checkpoints and roll by the rolling
// policy, as in one process: a decided lane state references the parts in
// progress as the lengths persisted at that checkpoint. A process that
// takes a lane over never resumes them, since its predecessor, if it is
// still alive, may still be writing to them: it closes each where the
// state records it (filesink.WithFinalizeOnRestore, s3.Backend.Finalize:
// the recorded parts plus the recorded tail as the last part number,
// which writers never use) and writes what follows into parts of its own.
// Part names carry the topic, the partition and the owner epoch
// ("PREFIX-TOPIC.PARTITION-eEPOCH-..."), so a
// lane's staging data is told apart from every other lane's and from older
// and newer owners' of the same lane.
//
// A job never waits for a rebalance to make progress (heal.go): a lane the
// group assigns to a process whose run of it stopped (a failed takeover, a
// fence by an owner that has left) is taken again by that process, and a
// partition with records to read that the stable group assigns to no
// member makes every process ask for a rebalance after Config.HealAfter.
// The group's committed offsets follow every lane's decided position, so
// consumer-group lag tools read the job's true lag.
package group
