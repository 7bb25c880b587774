// Writes Arrow IPC files, in the file and the stream format, of columns
// whose types arrow-go's array validator mishandles (null-typed, sparse
// and dense unions, a struct with a null-typed child), with Apache Arrow
// JS (pinned in package.json), which shares no code with arrow-go; and
// one damaged file (a dense union offset past its child) that a reader
// must refuse. Run with `npm ci && node generate.mjs`.
//
// Every file has `id` (int64, row i holds i) and more columns; row i of
// a union column holds the int32 i when i % 3 == 0, else the string
// "s" + i (or, with a null-typed child, a null). An empty record comes
// first, then records of 700 rows (the last fewer).
import { mkdirSync, writeFileSync, rmSync } from 'node:fs'
import * as arrow from 'apache-arrow'

const out = new URL('./files/', import.meta.url).pathname
rmSync(out, { recursive: true, force: true })
mkdirSync(out, { recursive: true })

const rows = 2000, batchRows = 700

function ids(n) { return arrow.makeVector(BigInt64Array.from({ length: n }, (_, i) => BigInt(i))) }

function nulls(n) { return arrow.makeVector(arrow.makeData({ type: new arrow.Null(), length: n, nullCount: n })) }

// union returns the union column of n rows, sparse or dense, with type
// codes codes (the int32 child's, then the string child's).
function union(n, mode, codes = [0, 1]) {
  const ints = [], strs = []
  const typeIds = new Int8Array(n), offsets = new Int32Array(n)
  for (let i = 0; i < n; i++) {
    const isInt = i % 3 === 0
    typeIds[i] = isInt ? codes[0] : codes[1]
    if (mode === 'dense') {
      offsets[i] = isInt ? ints.length : strs.length
      if (isInt) ints.push(i); else strs.push('s' + i)
    } else {
      ints.push(isInt ? i : 0)
      strs.push(isInt ? '' : 's' + i)
    }
  }
  const children = [
    arrow.makeData({ type: new arrow.Int32(), length: ints.length, data: Int32Array.from(ints) }),
    arrow.vectorFromArray(strs, new arrow.Utf8()).data[0],
  ]
  const fields = [new arrow.Field('i', new arrow.Int32(), true), new arrow.Field('s', new arrow.Utf8(), true)]
  const type = mode === 'dense' ? new arrow.DenseUnion(codes, fields) : new arrow.SparseUnion(codes, fields)
  const props = { type, length: n, nullCount: 0, typeIds, children }
  if (mode === 'dense') props.valueOffsets = offsets
  return arrow.makeVector(arrow.makeData(props))
}

// unionWithNull returns a union column of n rows whose third child is
// null-typed, as the Arrow integration suite's generated_union has: row i
// holds the int32 i when i % 3 == 0, else a null (of the null child).
function unionWithNull(n, mode) {
  const typeIds = new Int8Array(n), offsets = new Int32Array(n)
  const ints = []
  let nullRows = 0
  for (let i = 0; i < n; i++) {
    const isInt = i % 3 === 0
    typeIds[i] = isInt ? 42 : 44
    if (mode === 'dense') {
      offsets[i] = isInt ? ints.length : nullRows
      if (isInt) ints.push(i); else nullRows++
    } else {
      ints.push(isInt ? i : 0)
    }
  }
  const nullLen = mode === 'dense' ? nullRows : n
  const strs = mode === 'dense' ? [] : Array.from({ length: n }, () => '')
  const children = [
    arrow.makeData({ type: new arrow.Int32(), length: ints.length, data: Int32Array.from(ints) }),
    arrow.vectorFromArray(strs, new arrow.Utf8()).data[0],
    arrow.makeData({ type: new arrow.Null(), length: nullLen, nullCount: nullLen }),
  ]
  const fields = [new arrow.Field('i', new arrow.Int32(), true), new arrow.Field('s', new arrow.Utf8(), true), new arrow.Field('z', new arrow.Null(), true)]
  const type = mode === 'dense' ? new arrow.DenseUnion([42, 43, 44], fields) : new arrow.SparseUnion([42, 43, 44], fields)
  const props = { type, length: n, nullCount: 0, typeIds, children }
  if (mode === 'dense') props.valueOffsets = offsets
  return arrow.makeVector(arrow.makeData(props))
}

// structWithNull returns a struct column of n rows: an int32 x = 2i and a
// null-typed z.
function structWithNull(n) {
  const x = arrow.makeData({ type: new arrow.Int32(), length: n, data: Int32Array.from({ length: n }, (_, i) => 2 * i) })
  const z = arrow.makeData({ type: new arrow.Null(), length: n, nullCount: n })
  const type = new arrow.Struct([new arrow.Field('x', new arrow.Int32(), false), new arrow.Field('z', new arrow.Null(), true)])
  return arrow.makeVector(arrow.makeData({ type, length: n, nullCount: 0, children: [x, z] }))
}

// write writes the columns in records of batchRows, after an empty one.
function write(name, columns) {
  const whole = new arrow.Table(columns)
  const batches = [...whole.slice(0, 0).batches]
  for (let at = 0; at < rows; at += batchRows) batches.push(...whole.slice(at, Math.min(at + batchRows, rows)).batches)
  const table = new arrow.Table(batches)
  writeFileSync(out + name + '.arrow', arrow.tableToIPC(table, 'file'))
  writeFileSync(out + name + '.arrows', arrow.tableToIPC(table, 'stream'))
}

write('null', { id: ids(rows), n: nulls(rows) })
write('union-sparse', { id: ids(rows), u: union(rows, 'sparse') })
write('union-dense', { id: ids(rows), u: union(rows, 'dense') })
write('union-sparse-codes', { id: ids(rows), u: union(rows, 'sparse', [5, 2]) })
write('union-dense-codes', { id: ids(rows), u: union(rows, 'dense', [5, 2]) })
write('union-sparse-null-child', { id: ids(rows), u: unionWithNull(rows, 'sparse') })
write('union-dense-null-child', { id: ids(rows), u: unionWithNull(rows, 'dense') })
write('struct-null', { id: ids(rows), st: structWithNull(rows) })

// Damaged: a dense union whose last row points past its child.
{
  const u = union(rows, 'dense')
  const data = u.data[0]
  const offsets = Int32Array.from(data.valueOffsets)
  offsets[rows - 1] = 1 << 20
  const bad = arrow.makeData({ type: data.type, length: rows, nullCount: 0, typeIds: data.typeIds, valueOffsets: offsets, children: data.children })
  writeFileSync(out + 'damaged-union-offset.arrow', arrow.tableToIPC(new arrow.Table({ id: ids(rows), u: arrow.makeVector(bad) }), 'file'))
}
