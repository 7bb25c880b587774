// Package hostile holds the request bodies a hostile client sends a
// model server's JSON doors, so that the tests of every door, in-process
// and against the binary, send the same ones.
package hostile

import (
	"fmt"
	"strings"
)

// Payloads are the JSON values a hostile client puts where a door
// expects its inputs, by name: the large ones size bytes, the others
// 10^6 elements or levels.
func Payloads(size int) map[string]string {
	return map[string]string{
		"ids":                    "[[" + strings.Repeat("0,", size/2-1) + "0]]",
		"one string":             `"` + strings.Repeat("x", size) + `"`,
		"10^6 short strings":     "[" + strings.Repeat(`"a",`, 1_000_000-1) + `"a"]`,
		"10^6 levels of nesting": strings.Repeat("[", 1_000_000) + strings.Repeat("]", 1_000_000),
		"a 10^6-digit number":    "[[" + strings.Repeat("1", 1_000_000) + "]]",
		"10^6 empty arrays":      "[" + strings.Repeat("[],", 1_000_000-1) + "[]]",
		"an array of numbers":    "[" + strings.Repeat("0,", size/2-1) + "0]",
	}
}

// Door is a JSON door of a server: its path, and what goes before and
// after the payload in its request.
type Door struct{ Path, Head, Tail string }

// Body is the door's request around payload.
func (d Door) Body(payload string) []byte {
	return []byte(d.Head + payload + d.Tail)
}

// Doors are the JSON doors of a server of model, a text model reading
// "input_ids", for payloads of size bytes: OIP REST (texts, and ids of
// the shape the ids payload has), OpenAI's embeddings and TEI's.
func Doors(model string, size int) map[string]Door {
	oip := "/v2/models/" + model + "/infer"
	return map[string]Door{
		"OIP REST text":  {oip, `{"inputs":[{"name":"text","datatype":"BYTES","shape":[1],"data":`, `}]}`},
		"OIP REST texts": {oip, `{"inputs":[{"name":"text","datatype":"BYTES","shape":[1000000],"data":`, `}]}`},
		"OIP REST ids":   {oip, fmt.Sprintf(`{"inputs":[{"name":"input_ids","datatype":"INT64","shape":[1,%d],"data":`, size/2), `}]}`},
		"/v1/embeddings": {"/v1/embeddings", `{"model":"` + model + `","input":`, `}`},
		"/embed":         {"/embed", `{"inputs":`, `}`},
		"/rerank":        {"/rerank", `{"query":"q","texts":`, `}`},
		"/predict":       {"/predict", `{"inputs":`, `}`},
		"/tokenize":      {"/tokenize", `{"inputs":`, `}`},
	}
}
