// Reads a Parquet file with DuckDB (the @duckdb/node-api package of the
// writers' corpus) on the given threads, summing every feature value, and
// prints the best time of the rounds in seconds and the sum: the peer of
// drainpipe's reader in bench/pqread.
//
//   node bench/pqread/duckdb.mjs FILE THREADS ROUNDS NODE_MODULES
import { createRequire } from 'node:module';
import path from 'node:path';

const [file, threads, rounds, modules] = process.argv.slice(2);
const { DuckDBInstance } = createRequire(path.join(modules, 'index.js'))('@duckdb/node-api');
const db = await DuckDBInstance.create(':memory:', { threads: String(threads) });
const conn = await db.connect();
let best = Infinity, sum = 0;
for (let r = 0; r < Number(rounds); r++) {
  const began = process.hrtime.bigint();
  const reader = await conn.runAndReadAll(`SELECT sum(list_sum(features)) AS s, count(*) AS n FROM read_parquet('${file.replaceAll("'", "''")}')`);
  const secs = Number(process.hrtime.bigint() - began) / 1e9;
  best = Math.min(best, secs);
  sum = Number(reader.getRows()[0][0]);
}
console.log(JSON.stringify({ seconds: best, sum }));
