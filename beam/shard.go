package dpbeam

import (
	"context"
	"fmt"
	"regexp"

	"github.com/apache/arrow-go/v18/parquet/file"

	"github.com/drainpipe/drainpipe/dataset/fileset"
	"github.com/drainpipe/drainpipe/format"
	"github.com/drainpipe/drainpipe/storage"
)

// Shard is one unit of parallel work: part Index of Count of one input
// file. A file's parts are its row groups dealt round-robin (the core's
// fileset.Shard on a single file), so a Parquet file of many row groups
// splits into several shards and any other file is one. A row group is the
// smallest part of a Parquet file that decodes on its own: a file of one
// row group is one shard.
type Shard struct {
	Path  string // the input file
	File  int    // its place among the inputs, sorted
	Index int    // the part of the file
	Count int    // the file's parts
	Rows  int64  // rows the part's metadata declares; -1 if unknown
	// Version is the input object's version (its ETag) and Size its size
	// when the shards were planned: every shard of it reads that version
	// or fails with storage.ErrChanged, so an input replaced while the
	// pipeline runs is never mixed across shards. Empty for a local file.
	Version string
	Size    int64
}

// Name is the shard's output file name: the same on every attempt, so a
// retried shard rewrites its file instead of adding one.
func (s Shard) Name() string {
	return fmt.Sprintf("part-%05d-%03d-of-%03d.parquet", s.File, s.Index, s.Count)
}

// isShardFile reports whether name is a shard's output file, as Name
// makes them.
func isShardFile(name string) bool { return shardFile.MatchString(name) }

var shardFile = regexp.MustCompile(`^part-[0-9]{5,}-[0-9]{3,}-of-[0-9]{3,}\.parquet$`)

// Expand lists the shards of the files the patterns name: a Parquet file
// of R rows in G row groups becomes min(G, ⌈R/rowsPerShard⌉) shards, any
// other file one.
func Expand(ctx context.Context, patterns []string, rowsPerShard int64) ([]Shard, error) {
	paths, err := fileset.Expand(patterns)
	if err != nil {
		return nil, err
	}
	objects := storage.NewOpener()
	defer objects.Close()
	var shards []Shard
	for f, path := range paths {
		fm, err := format.Of(path)
		if err != nil {
			return nil, err
		}
		var pin storage.Info
		if storage.IsURL(path) {
			if pin, err = objects.Pin(ctx, path); err != nil {
				return nil, fmt.Errorf("dpbeam: %w", err)
			}
		}
		if fm != format.Parquet {
			shards = append(shards, Shard{Path: path, File: f, Index: 0, Count: 1, Rows: -1, Version: pin.ETag, Size: pin.Size})
			continue
		}
		groups, err := rowGroups(ctx, objects, path)
		if err != nil {
			return nil, err
		}
		var rows int64
		for _, n := range groups {
			rows += n
		}
		count := 1
		if rowsPerShard > 0 {
			count = int(min(int64(len(groups)), (rows+rowsPerShard-1)/rowsPerShard))
		}
		count = max(count, 1)
		for i := range count {
			sh := Shard{Path: path, File: f, Index: i, Count: count, Version: pin.ETag, Size: pin.Size}
			for g := i; g < len(groups); g += count {
				sh.Rows += groups[g]
			}
			shards = append(shards, sh)
		}
	}
	return shards, nil
}

// rowGroups returns the rows of each row group of a Parquet file, from
// its footer, read at the version objects pinned.
func rowGroups(ctx context.Context, objects *storage.Opener, path string) ([]int64, error) {
	f, err := objects.Open(ctx, path)
	if err != nil {
		return nil, fmt.Errorf("dpbeam: %w", err)
	}
	r, err := file.NewParquetReader(f)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("dpbeam: %s: %w", path, err)
	}
	defer r.Close()
	groups := make([]int64, r.NumRowGroups())
	for g := range groups {
		groups[g] = r.MetaData().RowGroup(g).NumRows()
	}
	return groups, nil
}

// describe names a shard in errors and logs.
func (s Shard) describe() string {
	if s.Count > 1 {
		return fmt.Sprintf("%s (part %d of %d)", s.Path, s.Index, s.Count)
	}
	return s.Path
}
