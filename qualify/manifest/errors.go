package manifest

import (
	"errors"

	"github.com/qualbox/qualbox/sandboxapi"
)

func asValidation(err error, out **sandboxapi.ValidationError) bool { return errors.As(err, out) }
