package main

import (
	"fmt"
	"reflect"
	"strings"
	"unicode/utf8"
)

// What the server sends is not the CLI's to print as is: a job's name and
// labels, its reason (which carries the last lines of a program's stderr),
// event messages and problem details can hold terminal escape sequences
// (retitle the window, clear the screen, write the clipboard with OSC 52),
// written by a tenant's program or by whoever answers in the server's
// place. So every answer the client decodes for display, and every error it
// prints, passes through termSafe here, one place for every verb: the
// client (client.shown) cleans what it decodes unless the verb prints JSON
// (-o json stays exact, and encoding/json escapes control characters in
// it), and exitCode cleans the error it prints. `edl logs` is the exception,
// on purpose: it prints the program's own bytes as they are, as kubectl logs
// and docker logs do (README).

// termSafe replaces the control characters of s, C0 (but newline and tab),
// DEL and C1, with a visible escape: caret notation for C0 and DEL (ESC is
// ^[, CR ^M), \u0080-style for C1; a byte that is not UTF-8 becomes \xNN
// (a lone 0x9b is CSI to some terminals).
func termSafe(s string) string {
	if !needsClean(s) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case r == '\n' || r == '\t':
			b.WriteRune(r)
		case r < 0x20:
			b.WriteByte('^')
			b.WriteByte(byte(r) + '@')
		case r == 0x7f:
			b.WriteString("^?")
		case r >= 0x80 && r <= 0x9f:
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}

func needsClean(s string) bool {
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		if (r == utf8.RuneError && n == 1) || (r < 0x20 && r != '\n' && r != '\t') || (r >= 0x7f && r <= 0x9f) {
			return true
		}
		i += n
	}
	return false
}

// sanitize applies termSafe to every string v (a pointer) holds: struct
// fields, slice and array elements, map keys and values, what interfaces
// hold (an event's data). Byte slices (raw JSON) are left alone.
func sanitize(v any) {
	rv := reflect.ValueOf(v)
	if rv.Kind() == reflect.Pointer && !rv.IsNil() {
		sanitizeValue(rv.Elem())
	}
}

func sanitizeValue(v reflect.Value) {
	switch v.Kind() {
	case reflect.String:
		if s := v.String(); v.CanSet() && needsClean(s) {
			v.SetString(termSafe(s))
		}
	case reflect.Pointer:
		if !v.IsNil() {
			sanitizeValue(v.Elem())
		}
	case reflect.Interface:
		if v.IsNil() || !v.CanSet() {
			return
		}
		c := reflect.New(v.Elem().Type()).Elem()
		c.Set(v.Elem())
		sanitizeValue(c)
		v.Set(c)
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				sanitizeValue(v.Field(i))
			}
		}
	case reflect.Slice, reflect.Array:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			return
		}
		for i := range v.Len() {
			sanitizeValue(v.Index(i))
		}
	case reflect.Map:
		if v.IsNil() || !v.CanSet() {
			return
		}
		out := reflect.MakeMapWithSize(v.Type(), v.Len())
		for it := v.MapRange(); it.Next(); {
			k := reflect.New(it.Key().Type()).Elem()
			k.Set(it.Key())
			sanitizeValue(k)
			e := reflect.New(it.Value().Type()).Elem()
			e.Set(it.Value())
			sanitizeValue(e)
			out.SetMapIndex(k, e)
		}
		v.Set(out)
	}
}
