package main

import (
	"testing"
	"time"

	"gotest.tools/v3/assert"
)

// The address actions' timeout: 3 s by default, a positive number of
// seconds when given, and a clear refusal for 0 (which the net and http
// packages read as no timeout at all), a negative or a non-number.
func TestAddressTimeout(t *testing.T) {
	d, err := addressTimeout([]string{"192.0.2.1:2375"})
	assert.NilError(t, err)
	assert.Equal(t, d, 3*time.Second)
	d, err = addressTimeout([]string{"192.0.2.1:2375", "0.5"})
	assert.NilError(t, err)
	assert.Equal(t, d, 500*time.Millisecond)
	_, err = addressTimeout([]string{"192.0.2.1:2375", "0"})
	assert.ErrorContains(t, err, `timeout "0": want more than 0 seconds`)
	_, err = addressTimeout([]string{"192.0.2.1:2375", "-1"})
	assert.ErrorContains(t, err, `seconds "-1" is not a number`)
	_, err = addressTimeout([]string{"192.0.2.1:2375", "soon"})
	assert.ErrorContains(t, err, `seconds "soon" is not a number`)
	_, err = addressTimeout(nil)
	assert.ErrorContains(t, err, "want 1 to 2 arguments, got 0")
}
