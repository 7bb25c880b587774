// Writes the independent writers' corpus that dataset's TestWritersCorpus
// reads: Parquet and Arrow IPC files of an int64 "id" and a float32 list
// "v", made by writers that share no code with drainpipe or with each
// other (versions pinned in package.json), and manifest.json, which says
// what each file holds. Run with `npm ci && node generate.mjs`.
//
// Row i holds value(i, j) at j = 0..k-1, but for the irregular rows the
// manifest names: "null" (a null row), "empty" (no values), "ragged"
// (k+1 values), "short" (k-1 values), "nullvalue" (value 1 null), "nan"
// (value 1 NaN). Values are exact in float32.
import { mkdirSync, writeFileSync, rmSync } from 'node:fs'
import { DuckDBInstance } from '@duckdb/node-api'
import * as arrow from 'apache-arrow'
import * as pqwasm from 'parquet-wasm'
import { parquetWriteFile } from 'hyparquet-writer'
import parquetjs from '@dsnp/parquetjs'

const out = new URL('./files/', import.meta.url).pathname
rmSync(out, { recursive: true, force: true })
mkdirSync(out, { recursive: true })

const value = (i, j) => (i * 7 + j) * 0.5 - 1000

// rowValues returns row i of a file as a JS array, or null.
function rowValues(i, k, irregular) {
  const kind = irregular[i]
  if (kind === 'null') return null
  if (kind === 'empty') return []
  const n = kind === 'ragged' ? k + 1 : kind === 'short' ? k - 1 : k
  const row = []
  for (let j = 0; j < n; j++) row.push(value(i, j))
  if (kind === 'nullvalue') row[1] = null
  if (kind === 'nan') row[1] = NaN
  return row
}

// Irregular rows in the first, a middle and the last row group, and on
// the boundaries of reads of 256 and 4,096 rows.
function spread(rows, kinds) {
  const at = [3, 255, 4096, Math.floor(rows / 2) + 1, rows - 1]
  const irregular = {}
  kinds.forEach((kind, n) => { irregular[at[n % at.length] + Math.floor(n / at.length)] = kind })
  return irregular
}

// A ragged and a short row in each of the first two row groups of
// groupRows: each group's values divide by its rows, so a reader cannot
// tell from the metadata that its rows are not alike, only from its pages.
function balanced(groupRows) {
  return { 5: 'ragged', [groupRows - 3]: 'short', [groupRows + 1]: 'short', [groupRows + 2]: 'ragged' }
}

const manifest = []
function record(name, writer, spec) {
  manifest.push({ name, writer, ...spec })
}

// DuckDB: SQL over range(), one thread so row groups are as asked.
async function duckdb() {
  const db = await DuckDBInstance.create(':memory:')
  const c = await db.connect()
  await c.run('SET threads=1')
  const sqlRow = (k, irregular, fixed) => {
    const cases = Object.entries(irregular).map(([row, kind]) => {
      const vals = rowValues(Number(row), k, irregular)
      const lit = vals === null ? 'NULL' : `[${vals.map(v => v === null ? 'NULL' : Number.isNaN(v) ? "'nan'::FLOAT" : `${v}::FLOAT`).join(', ')}]`
      return `WHEN i = ${row} THEN ${lit}`
    })
    const regular = `[${Array.from({ length: k }, (_, j) => `((i * 7 + ${j}) * 0.5 - 1000)::FLOAT`).join(', ')}]`
    const type = fixed ? `FLOAT[${k}]` : 'FLOAT[]'
    return cases.length ? `(CASE ${cases.join(' ')} ELSE ${regular} END)::${type}` : `${regular}::${type}`
  }
  const files = [
    { name: 'duckdb-list.parquet', rows: 10000, k: 4, irregular: {}, opts: 'ROW_GROUP_SIZE 2048' },
    { name: 'duckdb-list-irregular-zstd.parquet', rows: 10000, k: 4, opts: 'ROW_GROUP_SIZE 2048, COMPRESSION zstd',
      irregular: spread(10000, ['null', 'empty', 'ragged', 'nullvalue', 'nan', 'ragged', 'null']) },
    // A ragged row that is the last row of a default read (16,384 rows).
    { name: 'duckdb-ragged-read-end.parquet', rows: 20000, k: 3, irregular: { 16383: 'ragged' }, opts: 'ROW_GROUP_SIZE 100000' },
    // The first row longer than the rest.
    { name: 'duckdb-ragged-first.parquet', rows: 3000, k: 3, irregular: { 0: 'ragged' }, opts: 'ROW_GROUP_SIZE 100000' },
    // pqarrow (arrow-go v18.8.0) misplaces row 4,999's values here.
    { name: 'duckdb-array-v2-null-at-group-end.parquet', rows: 5000, k: 3, fixed: true, irregular: { 4998: 'null' },
      opts: 'PARQUET_VERSION v2, COMPRESSION uncompressed, ROW_GROUP_SIZE 7' },
    { name: 'duckdb-array-v2-irregular.parquet', rows: 9000, k: 3, fixed: true,
      irregular: spread(9000, ['null', 'nullvalue', 'nan', 'null', 'null']), opts: 'PARQUET_VERSION v2, ROW_GROUP_SIZE 2048' },
  ]
  // The smallest file on which pqarrow misplaces values: three rows of
  // FLOAT[3], the middle one null (docs/upstream/).
  files.push({ name: 'duckdb-array-null-minimal.parquet', rows: 3, k: 3, fixed: true, irregular: { 1: 'null' }, opts: 'ROW_GROUP_SIZE 2048' })
  for (const f of files) {
    await c.run(`COPY (SELECT i::BIGINT AS id, ${sqlRow(f.k, f.irregular, f.fixed)} AS v FROM range(${f.rows}) t(i))
      TO '${out}${f.name}' (FORMAT parquet, ${f.opts})`)
    const groups = await c.runAndReadAll(`SELECT count(DISTINCT row_group_id) FROM parquet_metadata('${out}${f.name}')`)
    record(f.name, 'DuckDB 1.5.6', { rows: f.rows, k: f.k, irregular: f.irregular, rowGroups: Number(groups.getRows()[0][0]) })
  }
}

// An Arrow JS table of id and v, v a list or a fixed_size_list of k.
function arrowTable(rows, k, irregular, fixed) {
  const elem = new arrow.Field('item', new arrow.Float32(), true)
  const type = fixed ? new arrow.FixedSizeList(k, elem) : new arrow.List(elem)
  const builder = arrow.makeBuilder({ type, nullValues: [null] })
  const ids = new BigInt64Array(rows)
  for (let i = 0; i < rows; i++) {
    ids[i] = BigInt(i)
    let row = rowValues(i, k, irregular)
    if (row === null && fixed) {
      builder.append(null)
      continue
    }
    builder.append(row)
  }
  const v = builder.finish().toVector()
  return new arrow.Table({ id: arrow.makeVector(ids), v })
}

// arrow-rs through parquet-wasm: the Arrow schema stored in the footer, so
// a fixed_size_list reads back as one.
function arrowRs() {
  const files = [
    { name: 'arrowrs-fixed-nulls.parquet', rows: 6000, k: 4, fixed: true, groupRows: 1000,
      irregular: spread(6000, ['null', 'nullvalue', 'nan', 'null', 'null']) },
    { name: 'arrowrs-list-irregular-bss-v2.parquet', rows: 6000, k: 5, groupRows: 700, pageBytes: 512, bss: true, v2: true,
      irregular: spread(6000, ['empty', 'null', 'ragged', 'nullvalue', 'nan', 'null']) },
    { name: 'arrowrs-list.parquet', rows: 8000, k: 8, groupRows: 3000, irregular: {} },
    // Small plain pages (arrow-rs ends a page only where a row starts).
    { name: 'arrowrs-list-pages.parquet', rows: 3000, k: 4, groupRows: 1000, pageBytes: 256, plain: true, irregular: balanced(1000) },
    { name: 'arrowrs-fixed-pages-v2.parquet', rows: 3000, k: 4, fixed: true, groupRows: 1000, pageBytes: 256, plain: true, v2: true, irregular: {} },
  ]
  for (const f of files) {
    const table = arrowTable(f.rows, f.k, f.irregular, f.fixed)
    let props = new pqwasm.WriterPropertiesBuilder().setMaxRowGroupSize(f.groupRows).setCompression(pqwasm.Compression.SNAPPY)
    if (f.pageBytes) props = props.setDataPageSizeLimit(f.pageBytes).setWriteBatchSize(64)
    if (f.plain) props = props.setDictionaryEnabled(false)
    if (f.bss) props = props.setDictionaryEnabled(false).setColumnEncoding('v.list.item', pqwasm.Encoding.BYTE_STREAM_SPLIT)
    if (f.v2) props = props.setWriterVersion(pqwasm.WriterVersion.V2)
    const wasmTable = pqwasm.Table.fromIPCStream(arrow.tableToIPC(table, 'stream'))
    writeFileSync(out + f.name, pqwasm.writeParquet(wasmTable, props.build()))
    record(f.name, 'arrow-rs (parquet-wasm 0.8.0)', { rows: f.rows, k: f.k, irregular: f.irregular,
      rowGroups: Math.ceil(f.rows / f.groupRows) })
  }
}

// hyparquet-writer: a three-level LIST of optional floats, no Arrow schema.
function hyparquet() {
  const files = [
    { name: 'hyparquet-list-irregular.parquet', rows: 5000, k: 3, groupRows: 1000,
      irregular: spread(5000, ['null', 'empty', 'ragged', 'nullvalue', 'nan', 'empty']) },
    { name: 'hyparquet-list.parquet', rows: 5000, k: 6, groupRows: [700, 2000], irregular: {} },
    // Pages of ~200 bytes (hyparquet-writer ends a page only where a row starts).
    { name: 'hyparquet-list-pages.parquet', rows: 3000, k: 4, groupRows: 1000, pageSize: 200, irregular: balanced(1000) },
  ]
  for (const f of files) {
    const ids = [], v = []
    for (let i = 0; i < f.rows; i++) {
      ids.push(BigInt(i))
      v.push(rowValues(i, f.k, f.irregular))
    }
    parquetWriteFile({
      filename: out + f.name,
      columnData: [{ name: 'id', data: ids }, { name: 'v', data: v }],
      schema: [
        { name: 'root', num_children: 2 },
        { name: 'id', type: 'INT64', repetition_type: 'REQUIRED' },
        { name: 'v', repetition_type: 'OPTIONAL', converted_type: 'LIST', num_children: 1 },
        { name: 'list', repetition_type: 'REPEATED', num_children: 1 },
        { name: 'element', type: 'FLOAT', repetition_type: 'OPTIONAL' },
      ],
      rowGroupSize: f.groupRows,
      pageSize: f.pageSize ?? 4096,
    })
    const sizes = Array.isArray(f.groupRows) ? f.groupRows : [f.groupRows]
    let groups = 0
    for (let left = f.rows; left > 0; groups++) left -= sizes[Math.min(groups, sizes.length - 1)]
    record(f.name, 'hyparquet-writer 0.17.0', { rows: f.rows, k: f.k, irregular: f.irregular, rowGroups: groups })
  }
}

// parquetjs: a bare repeated FLOAT (the legacy two-level list); it stores
// no null list, so its irregular rows are empty, ragged and NaN ones.
async function parquetJS() {
  const files = [
    { name: 'parquetjs-repeated.parquet', rows: 5000, k: 4, groupRows: 1200,
      irregular: spread(5000, ['empty', 'ragged', 'nan', 'ragged', 'empty']) },
    // Pages of 7 rows, version 1 and 2.
    { name: 'parquetjs-repeated-pages.parquet', rows: 3000, k: 4, groupRows: 1000, pageRows: 7, irregular: balanced(1000) },
    { name: 'parquetjs-repeated-pages-v2.parquet', rows: 3000, k: 4, groupRows: 1000, pageRows: 7, v2: true, irregular: balanced(1000) },
  ]
  const schema = new parquetjs.ParquetSchema({ id: { type: 'INT64' }, v: { type: 'FLOAT', repeated: true } })
  for (const f of files) {
    const opts = { rowGroupSize: f.groupRows }
    if (f.pageRows) opts.pageSize = f.pageRows
    if (f.pageRows && !f.v2) opts.useDataPageV2 = false // parquetjs writes version 2 pages unless told
    const w = await parquetjs.ParquetWriter.openFile(schema, out + f.name, opts)
    for (let i = 0; i < f.rows; i++) await w.appendRow({ id: BigInt(i), v: rowValues(i, f.k, f.irregular) })
    await w.close()
    record(f.name, '@dsnp/parquetjs 1.8.9', { rows: f.rows, k: f.k, irregular: f.irregular, rowGroups: Math.ceil(f.rows / f.groupRows) })
  }
}

// Apache Arrow JS: IPC files and streams in several record batches.
function arrowJS() {
  const files = [
    { name: 'arrowjs-fixed.arrow', format: 'file', rows: 5000, k: 3, fixed: true, batchRows: 1000,
      irregular: spread(5000, ['null', 'nullvalue', 'nan']) },
    { name: 'arrowjs-list.arrows', format: 'stream', rows: 5000, k: 4, batchRows: 777,
      irregular: spread(5000, ['null', 'empty', 'ragged', 'nullvalue', 'nan']) },
  ]
  for (const f of files) {
    const batches = []
    const whole = arrowTable(f.rows, f.k, f.irregular, f.fixed)
    for (let at = 0; at < f.rows; at += f.batchRows) {
      batches.push(...whole.slice(at, Math.min(at + f.batchRows, f.rows)).batches)
    }
    writeFileSync(out + f.name, arrow.tableToIPC(new arrow.Table(batches), f.format))
    record(f.name, 'Apache Arrow JS 21.2.0', { rows: f.rows, k: f.k, irregular: f.irregular, batches: batches.length })
  }
  // A fixed_size_list whose child holds fewer values than length × width:
  // Arrow JS writes it without a complaint; a reader must refuse it.
  const rows = 5000, k = 3
  const child = arrow.makeData({ type: new arrow.Float32(), length: rows * k - 3, data: new Float32Array(rows * k - 3) })
  const data = arrow.makeData({ type: new arrow.FixedSizeList(k, new arrow.Field('item', new arrow.Float32(), true)), length: rows, nullCount: 0, child })
  const ids = arrow.makeVector(BigInt64Array.from({ length: rows }, (_, i) => BigInt(i)))
  const short = new arrow.Table({ id: ids, v: arrow.makeVector(data) })
  writeFileSync(out + 'arrowjs-short-child.arrow', arrow.tableToIPC(short, 'file'))
  record('arrowjs-short-child.arrow', 'Apache Arrow JS 21.2.0', { rows, k, irregular: {}, damaged: 'a fixed_size_list child of 14997 values for 5000 rows of 3' })
}

await duckdb()
arrowRs()
hyparquet()
await parquetJS()
arrowJS()
manifest.sort((a, b) => a.name.localeCompare(b.name))
writeFileSync(out + 'manifest.json', JSON.stringify(manifest, null, 1) + '\n')
console.log(`${manifest.length} files in ${out}`)
