package s3

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"net/url"
	"syscall"

	"github.com/minio/minio-go/v7"

	"github.com/scc-dev/scc/vfd"
)

// The package's error sentinels. Every error a Driver returns matches at
// most one of them (or vfd.ErrClosed, vfd.ErrLocked, vfd.ErrInvalid, a
// context error) with errors.Is, and keeps the minio-go error in its chain
// for detail (errors.As finds its minio.ErrorResponse, with the S3 error code).
//
// ErrNotFound and ErrDenied also match fs.ErrNotExist and fs.ErrPermission,
// so code that knows only the standard library (the engine's classify
// among them) tells a missing object and a refused request apart without
// importing this package.
var (
	// ErrNotFound: the bucket, the commit object or a page object does not
	// exist (S3 NoSuchBucket, NoSuchKey, 404).
	ErrNotFound = fmt.Errorf("s3: object not found (%w)", fs.ErrNotExist)
	// ErrDenied: the server refused the request's credentials or
	// permissions (S3 AccessDenied, InvalidAccessKeyId,
	// SignatureDoesNotMatch, 401, 403).
	ErrDenied = fmt.Errorf("s3: access denied (%w)", fs.ErrPermission)
	// ErrNetwork: the request never got an S3 answer (connection refused or
	// reset, a timeout, a body cut short), after every retry.
	ErrNetwork = errors.New("s3: network failure")
	// ErrServer: the server answered with an error that retries did not
	// cure (5xx, 503 SlowDown), or an answer the driver cannot use.
	ErrServer = errors.New("s3: server error")
	// ErrCorrupt: the commit object does not decode (bad magic, checksum,
	// lengths). The object store holds something that is not an scc
	// commit object.
	ErrCorrupt = errors.New("s3: commit object is corrupt")
)

// classify wraps err, an error from minio-go or the network, in the
// sentinel of its class. Errors already classified pass unchanged.
func classify(op string, err error) error {
	if err == nil {
		return nil
	}
	for _, s := range []error{ErrNotFound, ErrDenied, ErrNetwork, ErrServer, ErrCorrupt,
		vfd.ErrClosed, vfd.ErrLocked, vfd.ErrInvalid, context.Canceled, context.DeadlineExceeded} {
		if errors.Is(err, s) {
			return err
		}
	}
	resp := errorResponse(err)
	switch {
	case resp.Code == "NoSuchKey" || resp.Code == "NoSuchBucket" || resp.StatusCode == http.StatusNotFound:
		return fmt.Errorf("%s: %w: %w", op, ErrNotFound, err)
	case resp.Code == "AccessDenied" || resp.Code == "InvalidAccessKeyId" || resp.Code == "SignatureDoesNotMatch" ||
		resp.StatusCode == http.StatusForbidden || resp.StatusCode == http.StatusUnauthorized:
		return fmt.Errorf("%s: %w: %w", op, ErrDenied, err)
	case resp.Code == "PreconditionFailed" || resp.StatusCode == http.StatusPreconditionFailed:
		return fmt.Errorf("%s: %w: %w", op, vfd.ErrLocked, err)
	case resp.StatusCode != 0 || resp.Code != "":
		return fmt.Errorf("%s: %w: %w", op, ErrServer, err)
	case isNetwork(err):
		return fmt.Errorf("%s: %w: %w", op, ErrNetwork, err)
	}
	return fmt.Errorf("%s: %w: %w", op, ErrServer, err)
}

// isNetwork reports whether err is a transport failure rather than an S3
// answer.
func isNetwork(err error) bool {
	var ne net.Error
	var ue *url.Error
	return errors.As(err, &ne) || errors.As(err, &ue) || errors.Is(err, syscall.ECONNREFUSED) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) ||
		errors.Is(err, errShortBody)
}

// errShortBody: a GET's body ended before the Content-Length the server
// promised (the connection dropped mid-transfer).
var errShortBody = errors.New("s3: response body shorter than its range")

// retryable reports whether a request that failed with err (unclassified)
// may succeed when sent again: throttling, 5xx, and transport failures.
// Answers that will not change (404, 403, 412, 416, 400) are final.
func retryable(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	resp := errorResponse(err)
	switch resp.Code {
	case "SlowDown", "SlowDownRead", "SlowDownWrite", "InternalError", "RequestTimeout",
		"ServiceUnavailable", "XMinioServerNotInitialized", "XMinioStorageFull", "OperationTimedOut":
		return true
	}
	switch {
	case resp.StatusCode >= 500, resp.StatusCode == http.StatusTooManyRequests,
		resp.StatusCode == http.StatusRequestTimeout:
		return true
	case resp.StatusCode != 0:
		return false
	}
	return isNetwork(err)
}

// errorResponse finds the S3 error answer in err's chain (the zero value
// when there is none).
func errorResponse(err error) minio.ErrorResponse {
	var r minio.ErrorResponse
	if errors.As(err, &r) {
		return r
	}
	return minio.ErrorResponse{}
}
