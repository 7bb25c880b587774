package fileset_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/drainpipe/drainpipe/dataset/fileset"
)

// The corpus files of small pages (their names say "pages"), whose row
// groups hold a ragged and a short row that their metadata cannot tell
// from rows alike, are read page by page up to the first page that is not
// uniform, and in reads of every size give the rows written
// (TestWritersCorpus checks their values): the page path meets pages of
// other writers, version 1 and 2, not only arrow-go's.
//
// parquetjs's version 2 pages state as many rows as values (29 for a
// page of 7 rows, one of them of 5 values), so none of them is taken as
// whole rows: the column reader reads them all.
func TestWritersCorpusPages(t *testing.T) {
	notByPage := map[string]bool{"parquetjs-repeated-pages-v2.parquet": true}
	dir, files := readManifest(t)
	seen := 0
	for _, f := range files {
		if !strings.Contains(f.Name, "pages") {
			continue
		}
		seen++
		t.Run(f.Name, func(t *testing.T) {
			for _, readRows := range []int{1, 7, 999, 4096} {
				var counts fileset.PageCounts
				mem := corpusAllocator(t, filepath.Join(dir, f.Name), true)
				cols, rows, err := readColumns(t, mem, filepath.Join(dir, f.Name), fileset.WithPageCounts(&counts), fileset.WithReadRows(readRows))
				releaseAll(cols)
				if err != nil || rows != f.Rows {
					t.Fatalf("reads of %d: %d rows of %d (%v)", readRows, rows, f.Rows, err)
				}
				if notByPage[f.Name] {
					if counts.Uniform() != 0 {
						t.Fatalf("reads of %d: %d pages read page by page, want none", readRows, counts.Uniform())
					}
					continue
				}
				if counts.Uniform() < 10 {
					t.Fatalf("reads of %d: %d pages read page by page, want the file's small pages", readRows, counts.Uniform())
				}
				if len(f.Irregular) > 0 && counts.FallBacks() == 0 {
					t.Fatalf("reads of %d: no chunk fell back, yet its rows are not alike", readRows)
				}
			}
		})
	}
	if seen < 5 {
		t.Fatalf("%d corpus files of small pages, want 5", seen)
	}
}
