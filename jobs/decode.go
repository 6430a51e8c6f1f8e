package jobs

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
)

// DecodeError is a request body that is not well-formed JSON at all (as
// opposed to well-formed JSON with fields at fault: *ValidationError).
type DecodeError struct {
	Offset int64
	Msg    string
}

func (e *DecodeError) Error() string {
	return fmt.Sprintf("malformed JSON at byte %d: %s", e.Offset, e.Msg)
}

// DecodeSpec parses a submitted spec strictly (unknown fields and trailing
// data are refused), applies defaults and validates it. Its errors are
// *DecodeError or *ValidationError, never anything else.
func DecodeSpec(data []byte) (Spec, error) {
	var s Spec
	if err := DecodeStrict(data, &s); err != nil {
		return Spec{}, err
	}
	s = s.WithDefaults()
	if err := s.Validate(); err != nil {
		return Spec{}, err
	}
	return s, nil
}

// DecodeStrict decodes one JSON value into v, refusing unknown fields,
// field names in another case than the field's ("Name" for "name"),
// duplicate keys and trailing data, and maps the decoder's errors to
// *DecodeError (syntax) or *ValidationError (a field of the wrong type or
// out of range, an unknown field, a key given twice).
func DecodeStrict(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		err = decodeErr(err, dec.InputOffset())
		var de *DecodeError
		if errors.As(err, &de) && json.Valid(data) {
			// Well-formed: a value its type's own decoder refused (a
			// deadline that is not a time). Name it as a field at fault.
			if path, reason := refusedValue(data, reflect.TypeOf(v), ""); path != "" {
				return Invalid(path, reason)
			}
		}
		var ve *ValidationError
		if errors.As(err, &ve) && len(ve.Fields) == 1 && ve.Fields[0].Reason == reasonUnknownField {
			// encoding/json names the key alone: find its path.
			if p := unknownFieldPath(data, reflect.TypeOf(v), ve.Fields[0].Field); p != "" {
				ve.Fields[0].Field = p
			}
		}
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return &DecodeError{Offset: dec.InputOffset(), Msg: "trailing data after the JSON value"}
	}
	// After the decode, which bounds the nesting depth and judged the syntax.
	return checkKeys(data, reflect.TypeOf(v))
}

func decodeErr(err error, offset int64) error {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.Is(err, io.EOF):
		return &DecodeError{Offset: 0, Msg: "empty body"}
	case errors.Is(err, io.ErrUnexpectedEOF):
		return &DecodeError{Offset: offset, Msg: "unexpected end of input"}
	case errors.As(err, &syn):
		return &DecodeError{Offset: syn.Offset, Msg: syn.Error()}
	case errors.As(err, &typ):
		field := typ.Field
		if field == "" {
			field = "(body)"
		}
		return Invalid(field, fmt.Sprintf("must be %s, not JSON %s", jsonKind(typ.Type.Kind().String()), typ.Value))
	}
	// encoding/json reports unknown fields only as text; this is the one
	// place that reads it.
	if msg := err.Error(); strings.HasPrefix(msg, "json: unknown field ") {
		return Invalid(strings.Trim(strings.TrimPrefix(msg, "json: unknown field "), `"`), reasonUnknownField)
	}
	return &DecodeError{Offset: offset, Msg: err.Error()}
}

func jsonKind(goKind string) string {
	switch goKind {
	case "int", "int8", "int16", "int32", "int64", "uint", "uint8", "uint16", "uint32", "uint64":
		return "an integer in range"
	case "float32", "float64":
		return "a number"
	case "string":
		return "a string"
	case "bool":
		return "a boolean"
	case "slice", "array":
		return "an array"
	case "map", "struct":
		return "an object"
	case "ptr":
		return "an object or null"
	}
	return "another type"
}
