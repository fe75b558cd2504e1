package s3

import (
	"errors"
	"fmt"

	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/smithy-go"

	"github.com/filesink/filesink/committer"
)

// UploadGoneError reports that a multipart upload no longer exists: one
// recorded in a checkpoint (found at Resume, or at Commit with no matching
// object published from it), or one this run was writing. It matches
// committer.ErrDataLoss. Its message says what is gone and what running
// the job again does.
type UploadGoneError struct {
	Bucket   string
	Key      string // object key of the part file
	UploadID string
	// Committing is set when the upload was gone at Commit and the object
	// is missing; otherwise it was gone at Resume, or while written.
	Committing bool
	// Writing is set when the upload was gone while this run wrote it (a
	// part upload failed); Recorded then says whether a checkpoint of this
	// run recorded it (it was resumed, or persisted), which may have been
	// decided.
	Writing, Recorded bool
}

func (e *UploadGoneError) Error() string {
	head := fmt.Sprintf("s3: multipart upload %s of s3://%s/%s no longer exists", e.UploadID, e.Bucket, e.Key)
	cause := "a lifecycle rule (AbortIncompleteMultipartUpload) or an operator (filesink uploads abort --force, aws s3api abort-multipart-upload) probably aborted it"
	rule := "give the bucket's AbortIncompleteMultipartUpload rule an age longer than the longest time a part file stays open plus the longest outage"
	if e.Writing && !e.Recorded {
		return fmt.Sprintf("%s: it was aborted while this run wrote it (%s): this run stops before deciding its next checkpoint, and nothing that was decided is lost: "+
			"no checkpoint recorded this part file, so running the job again resumes from its last decided checkpoint and writes its records again, once; "+
			"to keep it from happening again, %s: %v", head, cause, rule, committer.ErrDataLoss)
	}
	lost := "the staged data of this part file as of the newest checkpoint that recorded it is gone"
	if e.Writing {
		lost = "this run's checkpoints recorded this part file: if one of them was decided, its staged data as of that checkpoint is gone"
	} else if e.Committing {
		lost += " (the object was never published from the upload, or was deleted since)"
	}
	return fmt.Sprintf("%s: %s; %s: the file sink makes it again from the source records its checkpoint lists (filesink.WithReplayer), "+
		"and stops with a data-loss error naming those records only when the source no longer has them; "+
		"to keep it from happening again, %s: %v", head, cause, lost, rule, committer.ErrDataLoss)
}

// Unwrap returns committer.ErrDataLoss.
func (e *UploadGoneError) Unwrap() error { return committer.ErrDataLoss }

// dataLoss returns an error wrapping committer.ErrDataLoss.
func dataLoss(format string, args ...any) error {
	return fmt.Errorf(format+": %w", append(args, committer.ErrDataLoss)...)
}

// alreadyExists returns an error wrapping committer.ErrAlreadyExists.
func alreadyExists(format string, args ...any) error {
	return fmt.Errorf(format+": %w", append(args, committer.ErrAlreadyExists)...)
}

func apiCode(err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorCode()
	}
	return ""
}

func httpStatus(err error) int {
	var re *awshttp.ResponseError
	if errors.As(err, &re) {
		return re.HTTPStatusCode()
	}
	return 0
}

// isNotFound: HEAD or GET of a missing object.
func isNotFound(err error) bool {
	switch apiCode(err) {
	case "NotFound", "NoSuchKey":
		return true
	}
	return httpStatus(err) == 404 && apiCode(err) != "NoSuchBucket"
}

func isNoSuchUpload(err error) bool { return apiCode(err) == "NoSuchUpload" }

func isPreconditionFailed(err error) bool {
	return apiCode(err) == "PreconditionFailed" || httpStatus(err) == 412
}

// isNotImplemented: the store does not support a header or operation.
func isNotImplemented(err error) bool {
	return apiCode(err) == "NotImplemented" || httpStatus(err) == 501
}
