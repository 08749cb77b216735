package awsbatch

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"syscall"

	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/batch"
	"github.com/aws/smithy-go"

	"github.com/jobbridge/jobbridge/adapters"
)

// sendRecord learns whether a request may have reached the service.
type sendRecord struct{ maybeSent atomic.Bool }

// recordingClient wraps the SDK's HTTP client for one SubmitJob call and
// fills in its sendRecord. A request certainly did not reach the service
// when it was never handed to the HTTP client, or when dialling failed.
type recordingClient struct {
	next batch.HTTPClient
	rec  *sendRecord
}

func (c *recordingClient) Do(req *http.Request) (*http.Response, error) {
	resp, err := c.next.Do(req)
	if err == nil || !isDialError(err) {
		c.rec.maybeSent.Store(true)
	}
	return resp, err
}

// isDialError reports an error that happened before a connection existed.
func isDialError(err error) bool {
	var dns *net.DNSError
	if errors.As(err, &dns) || errors.Is(err, syscall.ECONNREFUSED) {
		return true
	}
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// httpStatus returns the HTTP status of the answer an SDK error came with,
// or 0 when there was no answer.
func httpStatus(err error) int {
	var re *awshttp.ResponseError
	if errors.As(err, &re) && re.Response != nil {
		return re.HTTPStatusCode()
	}
	return 0
}

// apiCode returns the service's error code (such as ClientException), or "".
func apiCode(err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorCode()
	}
	return ""
}

// isThrottle reports a throttling answer: HTTP 429 or a throttling code.
func isThrottle(err error) bool {
	if httpStatus(err) == http.StatusTooManyRequests {
		return true
	}
	_, ok := retry.DefaultThrottleErrorCodes[apiCode(err)]
	return ok
}

// classifySubmit turns a SubmitJob error into the adapter's outcome: a
// refusal (the job was certainly not created) or an unknown outcome
// (wrapping adapters.ErrOutcomeUnknown).
func classifySubmit(err error, maybeSent bool) error {
	status := httpStatus(err)
	switch {
	case status == 0 && !maybeSent:
		return fmt.Errorf("request not sent: %w", err)
	case status == 0:
		return fmt.Errorf("%w: %w", adapters.ErrOutcomeUnknown, err)
	case isThrottle(err):
		// A throttled request is rejected before it is acted on.
		return fmt.Errorf("AWS Batch throttled the submission, so no job was created; try again shortly: %w", err)
	case status >= 400 && status < 500 && status != http.StatusRequestTimeout:
		return fmt.Errorf("AWS Batch refused the job: %w", err)
	}
	// A 5xx, a 408, or a 2xx whose answer could not be read.
	return fmt.Errorf("%w: %w", adapters.ErrOutcomeUnknown, err)
}

// isJobNotFound reports Batch's answer for a job ID it does not know.
func isJobNotFound(err error) bool {
	if apiCode(err) != "ClientException" {
		return false
	}
	var ae smithy.APIError
	errors.As(err, &ae)
	msg := strings.ToLower(ae.ErrorMessage())
	return strings.Contains(msg, "not found") || strings.Contains(msg, "does not exist")
}
