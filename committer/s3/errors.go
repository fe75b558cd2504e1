package s3

import (
	"errors"
	"fmt"

	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/smithy-go"

	"github.com/filesink/filesink/committer"
)

// UploadGoneError reports that a multipart upload recorded in a checkpoint
// no longer exists (and, for a commit, that no matching object was published
// from it). It matches committer.ErrDataLoss.
type UploadGoneError struct {
	Bucket   string
	Key      string // object key of the part file
	UploadID string
	// Committing is set when the upload was gone at Commit and the object
	// is missing; otherwise it was gone at Resume.
	Committing bool
}

func (e *UploadGoneError) Error() string {
	what := "its parts are lost"
	if e.Committing {
		what = "the object was never published from it (or was deleted since), so its parts are lost"
	}
	return fmt.Sprintf("s3: multipart upload %s of s3://%s/%s no longer exists and %s: "+
		"a lifecycle rule (AbortIncompleteMultipartUpload) or an operator (filesink uploads abort, aws s3api abort-multipart-upload) probably aborted it. "+
		"No checkpoint can bring it back: replay the records since the last published file of this part from the source into a fresh state "+
		"(a new --state location), or accept their loss; then give the bucket's AbortIncompleteMultipartUpload rule an age longer than "+
		"the longest time a part file stays open plus the longest outage: %v",
		e.UploadID, e.Bucket, e.Key, what, committer.ErrDataLoss)
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
