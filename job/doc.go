// Package job runs a batch inference job over files: read, predict, write
// the predictions next to the row keys, with nothing lost or duplicated
// even when the job is killed and started again.
//
// # Exactly once
//
// The job writes its predictions in durable parts of a fixed number of
// rows, part j holding rows [j·P, (j+1)·P) of the input, into a folder
// beside the output (OUTPUT.parts). Each part is written aside and renamed
// when complete; then a manifest listing the completed parts is replaced
// atomically. A job killed at any moment (SIGKILL included) and started
// again with Resume skips the rows of the completed parts and goes on; a
// half-written part is discarded. When every row is done, the parts are
// merged into the output (again written aside and renamed) and the folder
// is removed. Part boundaries do not depend on where a run stopped, and the
// merge re-chunks rows into fixed-size row groups, so the output of a
// resumed job is byte for byte the output of a job never interrupted.
//
// A manifest records a fingerprint of the inputs (names, sizes, times), the
// model and the settings; resuming with any of them changed is refused.
//
// # Two outputs
//
// A file output is written once every part is done, by merging the parts
// (Arrow IPC files in OUTPUT.parts). A folder output (a path ending in a
// separator, or an existing folder) holds the parts themselves as Parquet
// files, part-00000.parquet and on, with _manifest.json and a _SUCCESS
// marker written last: no merge. See [Run] and [IsFolder].
//
// # Shared folders: any number of processes
//
// [RunUnits] runs one shard (i of n) of a job whose output folder n
// processes share, under any scheduler (a Kubernetes Indexed Job, a shell
// loop); the Beam transform runs on the same three steps. [PlanUnits]
// cuts the inputs into units, fixed ranges of one pinned input's whole row
// groups (Config.PartRows rows at a time, [Unit]), named by input and first
// row — never by a shard count — and binds the folder to the job (_job.json:
// the fingerprint, inputs and their versions); another job is refused
// ([ErrChanged], naming an input that changed) unless Overwrite. Process i
// writes the units u ≡ i (mod n) not committed yet ([WriteUnit]), each
// one file written If-None-Match: of two processes that run one unit, the
// first commit wins and the second discards its work ([ErrUnitTaken]);
// a store that ignores the condition gets the same bytes twice. There is
// no folder lock: a unit's conditional commit is its lock. The process
// that finds every unit committed ([Seal]) checks each unit file's footer
// (its job, input version and rows), writes the manifest, units in input
// order, and _SUCCESS. A rerun with any n skips the committed units and
// ends with the bytes of an uninterrupted single process; what it reads to
// resume is a listing and a footer a unit, O(units), never O(rows).
//
// # The write layer
//
// Under [Run] is a write layer: read the inputs (the input recipe of
// dataset/fileset.Features), predict, hand the predictions to an output,
// and check the rows read, written and set aside add up. Run adds the
// lock, the output's layout, the parts and resume. [WriteFile] writes one
// file once through the same layer, with no lock, parts or manifest, for
// a runner that retries a failed piece of work whole under a name of its
// own (a Beam shard): exactly once without a second write of every row.
// [Each] hands the predictions to a function instead (an evaluation's
// metrics, with the labels as [Config.Label]), and [Read] hands over the
// rows a trainer reads, with no model; both set rows aside as WriteFile
// does.
//
// # Nothing lost
//
// Every row read is counted and numbered. A run succeeds only if the rows
// read equal the rows the inputs declare (Parquet footers) and the rows
// written plus those set aside equal the rows read ([ErrRowsLost]). A
// running job holds a lock beside its output ([ErrLocked]): an flock on
// local disk; on object storage a lock object with a token of its own
// (a lock, not a lease: it never expires), taken over (BreakLock) only by
// a write conditional on the version read, checked before every commit —
// a part, the manifest, _SUCCESS, the output file — and deleted at the
// end only if still its own ([ErrLockRelease] if it cannot be). The
// manifest is the fencing token: each write of it is conditional on the
// version the run last wrote, _SUCCESS and the output file on there being
// none, so a job whose lock was broken stops ([ErrLockLost]) and never
// mixes its parts with the breaker's, even if the take-over came between
// its check and its commit. A row that
// cannot be predicted ends the job with an error naming its input file,
// the row in that file and the column; with [Config.SetAside] it is
// written to a file of its own instead, found by checking features before
// batching and by bisecting a batch the device fails
// (predict.WithSetAside). Each part records the input rows it covers and
// its rows set aside, so both outputs are exactly once across resumes.
package job
