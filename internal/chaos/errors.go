package chaos

import "errors"

// ErrInvalidConfig is wrapped by every configuration error.
var ErrInvalidConfig = errors.New("chaos: invalid config")
