package node

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/vkubelet/virtual-kubelet/node/errdefs"
)

// retryUntilPermanent retries a key as long as the error may pass (an API
// server outage, a timeout, throttling) and gives up only on errors that
// retrying cannot fix.
func retryUntilPermanent(_ context.Context, key string, timesTried int, _ time.Time, err error) (*time.Duration, error) {
	if apierrors.IsNotFound(err) || apierrors.IsInvalid(err) || apierrors.IsBadRequest(err) ||
		apierrors.IsMethodNotSupported(err) || errdefs.IsInvalidInput(err) {
		return nil, fmt.Errorf("giving up on %s after %d tries: %w", key, timesTried, err)
	}
	return nil, nil
}
