package storage

import "encoding/json"

// The layout of an output folder, shared by the CLI's jobs and the Beam
// transform (and by the readers of Spark-style folders): data files
// (part-*.parquet), then ManifestName listing them, then SuccessName, last,
// saying the folder is complete. A reader of a folder with a manifest and
// no marker finds an output still being written.
const (
	ManifestName = "_manifest.json"
	SuccessName  = "_SUCCESS"
)

// ManifestPart is one data file of a folder's manifest: every manifest
// holds a "parts" list of these (a writer adds fields of its own).
type ManifestPart struct {
	File string `json:"file"` // "" for a part with no rows of its own
	Rows int64  `json:"rows"`
}

// Success is what SuccessName holds: the rows and parts of the complete
// folder.
type Success struct {
	Rows  int64 `json:"rows"`
	Parts int   `json:"parts"`
}

// Marshal returns the marker's content.
func (s Success) Marshal() []byte {
	b, _ := json.MarshalIndent(s, "", "  ")
	return append(b, '\n')
}
