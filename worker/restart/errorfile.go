package restart

import (
	"encoding/json"
	"io"
	"os"
	"strings"
)

// maxErrorFile bounds what is read of a program's error file.
const maxErrorFile = 1 << 20

// errorFileMessage is the root cause a failed program wrote to
// TORCHELASTIC_ERROR_FILE, the way torchrun reports it: the message of the
// exception `torch.distributed.elastic.multiprocessing.errors.record` caught
// ({"message": {"message": "ValueError: ...", "extraInfo": {...}}}), or a
// plain {"message": "..."}. "" when there is no file, or nothing in it to
// read: a program that does not use record writes none.
func errorFileMessage(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	var doc struct {
		Message json.RawMessage `json:"message"`
	}
	if err := json.NewDecoder(io.LimitReader(f, maxErrorFile)).Decode(&doc); err != nil {
		return ""
	}
	var msg string
	if err := json.Unmarshal(doc.Message, &msg); err != nil {
		var nested struct {
			Message string `json:"message"`
		}
		if json.Unmarshal(doc.Message, &nested) != nil {
			return ""
		}
		msg = nested.Message
	}
	msg = strings.TrimSpace(msg)
	if len(msg) > maxErrorMessage {
		msg = strings.ToValidUTF8(msg[:maxErrorMessage], "") + "..." // no rune cut in half
	}
	return msg
}

// maxErrorMessage bounds the message kept in events and the job's reason.
const maxErrorMessage = 1024
