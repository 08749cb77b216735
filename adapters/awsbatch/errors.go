package awsbatch

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/aws"
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
	if err == nil || !adapters.NotSent(err) {
		c.rec.maybeSent.Store(true)
	}
	return resp, err
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

// retryAfterOf is the pause a throttling answer asked for in a Retry-After
// header (delay seconds or an HTTP date), or zero. Batch documents no such
// header, but a proxy or a later service version may send one.
func retryAfterOf(err error) time.Duration {
	var re *awshttp.ResponseError
	if !errors.As(err, &re) || re.Response == nil {
		return 0
	}
	v := strings.TrimSpace(re.Response.Header.Get("Retry-After"))
	if n, perr := strconv.ParseInt(v, 10, 64); perr == nil && n > 0 {
		return time.Duration(min(n, 86400)) * time.Second
	}
	if t, perr := http.ParseTime(v); perr == nil {
		return max(time.Until(t), 0)
	}
	return 0
}

// throttled wraps err, which the caller made from a throttling answer, in
// an adapters.ThrottledError with the pause the answer asked for.
func throttled(err, answer error) error {
	return &adapters.ThrottledError{RetryAfter: retryAfterOf(answer), Err: err}
}

// refusedCodes are the error codes of a caller the service refused: a
// missing permission, an expired or unknown credential, a bad signature.
var refusedCodes = map[string]bool{
	"AccessDeniedException": true, "AccessDenied": true, "ExpiredTokenException": true, "ExpiredToken": true,
	"UnrecognizedClientException": true, "InvalidClientTokenId": true, "InvalidSignatureException": true,
	"SignatureDoesNotMatch": true, "IncompleteSignature": true, "MissingAuthenticationToken": true,
	"NotAuthorized": true, "RequestExpired": true,
}

// problem describes a failed call of the API operation op (such as
// "DescribeJobs") as an [adapters.CallError]: the operation as its Method,
// the HTTP status, and as Message the service's error code and message
// ("ClientException: Job queue q does not exist"), or, when no answer
// came, what went wrong on the way. Its class is throttled for throttling
// answers, refused for a refused caller (AccessDeniedException,
// ExpiredTokenException, ...; any 401 or 403), unreachable without an
// answer, and error otherwise. kind is the sentinel it wraps besides err;
// nil for none.
func problem(op string, kind, err error) *adapters.CallError {
	ce := &adapters.CallError{Method: op, Status: httpStatus(err), Err: err}
	if kind != nil {
		ce.Err = fmt.Errorf("%w: %w", kind, err)
	}
	code := apiCode(err)
	switch {
	case isThrottle(err):
		ce.Class = adapters.ProblemThrottled
	case refusedCodes[code] || ce.Status == http.StatusUnauthorized || ce.Status == http.StatusForbidden:
		ce.Class = adapters.ProblemRefused
	case ce.Status == 0:
		ce.Class = adapters.ProblemUnreachable
	default:
		ce.Class = adapters.ProblemError
	}
	var ae smithy.APIError
	switch {
	case errors.As(err, &ae):
		ce.Message = ae.ErrorCode()
		if m := ae.ErrorMessage(); m != "" {
			ce.Message += ": " + m
		}
	default:
		ce.Message = causeText(err)
	}
	ce.Message = shorten(strings.Join(strings.Fields(ce.Message), " "))
	return ce
}

// causeText is the text of the innermost error that says what went wrong
// on the way, without the SDK's wrappers ("operation error Batch: ...") and
// the URL an *url.Error quotes.
func causeText(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err.Error()
	}
	var oe *smithy.OperationError
	if errors.As(err, &oe) && oe.Err != nil {
		err = oe.Err
	}
	var re *awshttp.ResponseError
	if errors.As(err, &re) && re.Err != nil {
		err = re.Err
	}
	return err.Error()
}

// shorten cuts s to maxErrorText bytes.
func shorten(s string) string {
	if len(s) <= maxErrorText {
		return s
	}
	cut := maxErrorText
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// maxErrorText bounds the text of an error the bridge shows to callers.
const maxErrorText = 500

// classifySubmit turns a SubmitJob error into the adapter's outcome, an
// [adapters.CallError]: a refusal (the job was certainly not created; the
// message is Batch's own), throttling (inside an adapters.ThrottledError:
// no job was created), a request not sent, or an unknown outcome (wrapping
// adapters.ErrOutcomeUnknown).
func classifySubmit(err error, maybeSent bool) error {
	status := httpStatus(err)
	switch {
	case status == 0 && !maybeSent:
		return problem("SubmitJob", nil, err)
	case status == 0:
		return problem("SubmitJob", adapters.ErrOutcomeUnknown, err)
	case isThrottle(err):
		// A throttled request is rejected before it is acted on.
		return throttled(problem("SubmitJob", nil, err), err)
	case status >= 400 && status < 500 && status != http.StatusRequestTimeout:
		return problem("SubmitJob", nil, err)
	}
	// A 5xx, a 408, or a 2xx whose answer could not be read.
	return problem("SubmitJob", adapters.ErrOutcomeUnknown, err)
}

// withoutThrottleRetries is a per-call option that keeps the client's
// retries but never retries a throttling answer: the bridge pauses every
// call to the backend on adapters.ErrThrottled, so retrying would only add
// to the storm and hold the caller.
func withoutThrottleRetries(o *batch.Options) {
	if o.Retryer != nil {
		o.Retryer = noThrottleRetryer{o.Retryer}
	}
}

// noThrottleRetryer is a retryer that does not retry throttling.
type noThrottleRetryer struct{ aws.Retryer }

func (r noThrottleRetryer) IsErrorRetryable(err error) bool {
	return !isThrottle(err) && r.Retryer.IsErrorRetryable(err)
}

func (r noThrottleRetryer) GetAttemptToken(ctx context.Context) (func(error) error, error) {
	if v2, ok := r.Retryer.(aws.RetryerV2); ok {
		return v2.GetAttemptToken(ctx)
	}
	return r.Retryer.GetInitialToken(), nil
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
