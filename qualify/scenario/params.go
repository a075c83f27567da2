package scenario

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
)

func asTypeError(err error, out **json.UnmarshalTypeError) bool { return errors.As(err, out) }

// jsonFields lists the json names of the struct v points to.
func jsonFields(v any) []string {
	t := reflect.TypeOf(v)
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct {
		return nil
	}
	var out []string
	for i := range t.NumField() {
		name := strings.Split(t.Field(i).Tag.Get("json"), ",")[0]
		if name != "" && name != "-" {
			out = append(out, name)
		}
	}
	if len(out) == 0 {
		return []string{"(none)"}
	}
	return out
}
