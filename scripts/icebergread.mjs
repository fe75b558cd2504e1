// scripts/icebergread.mjs: an independent reader of Apache Iceberg tables,
// for tests. It does not use iceberg-go (the library the Iceberg sink is
// built on cannot judge its own output): it reads the metadata JSON itself,
// the manifest list and the manifests with avsc (Avro), and the data files
// with DuckDB's read_parquet. scripts/icebergread installs both packages and
// prints the node_modules directory to put in NODE_PATH:
//
//   NODE_PATH="$(scripts/icebergread)" node scripts/icebergread.mjs \
//       --metadata TABLE/metadata/00002-....metadata.json \
//       [--map s3://bucket/prefix=/local/dir ...] [--rows | --columns NAME,...]
//
// The metadata is a local path or a location that a --map maps.
//
// It follows current-snapshot-id to its manifest list, keeps the manifest
// entries that are not DELETED (status 2) as the live data files, and
// prints one JSON object on stdout:
//
//   format_version, current_snapshot_id, snapshots (id, parent,
//   sequence_number, timestamp_ms, operation, summary, manifest_list),
//   files (path, records, size, partition, status, snapshot_id, manifest),
//   duplicate_paths, rows, records_by_file, errors, and with --rows also
//   data: every row of the live files (with --columns, only those
//   columns), file by file in manifest order
//   (DuckDB's JSON form: 64-bit integers as strings)
//
// Ids are strings. rows and records_by_file are the row counts DuckDB
// reads, not the manifests' record_count. "errors" lists what is wrong but
// readable: a data file that is missing or unreadable, whose row count or
// size differs from its manifest entry; a manifest whose entries differ
// from the counts of the manifest list; a current snapshot whose summary
// totals differ from its live files; the main branch not at the current
// snapshot. Inputs it cannot read at all (the metadata, a manifest list, a
// manifest), a format version other than 1 or 2, delete manifests and
// delete files (the sink appends only), and data files in another format
// than Parquet end it with exit status 1 and one line on stderr.
//
// Paths: Iceberg stores absolute locations (file:///x, file:/x, /x or
// s3://bucket/key). Each --map PREFIX=DIR rewrites locations starting with
// PREFIX to DIR (the longest prefix wins); other locations must be file:
// URIs or absolute paths.
//
// Avro: the codecs null and deflate (what iceberg-go and Java write by
// default); snappy and zstd manifests are refused.
import fs from 'node:fs';
import path from 'node:path';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';

const prog = 'icebergread';

// fail ends the program with one line on stderr.
function fail(msg) {
  process.stderr.write(`${prog}: ${String(msg).replace(/\s*\n\s*/g, ' ')}\n`);
  process.exit(1);
}

// requireModules returns a require function that resolves from NODE_PATH's
// first directory: ES modules ignore NODE_PATH.
function requireModules() {
  const dirs = (process.env.NODE_PATH || '').split(path.delimiter).filter(Boolean);
  if (dirs.length === 0) {
    fail('NODE_PATH is not set: set it to the directory scripts/icebergread prints');
  }
  return createRequire(path.join(path.resolve(dirs[0]), 'icebergread-require.js'));
}

function parseArgs(argv) {
  const opts = { metadata: '', maps: [], rows: false, columns: '*' };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const value = () => {
      if (i + 1 >= argv.length) fail(`${a} needs a value`);
      return argv[++i];
    };
    if (a === '--metadata') opts.metadata = value();
    else if (a === '--rows') opts.rows = true;
    else if (a === '--columns') {
      const cols = value().split(',');
      if (cols.some((c) => !/^[A-Za-z_][A-Za-z0-9_]*$/.test(c))) fail(`--columns ${cols}: want NAME[,NAME...]`);
      opts.rows = true;
      opts.columns = cols.map((c) => `"${c}"`).join(', ');
    }
    else if (a === '--map') {
      const m = value();
      const eq = m.indexOf('=');
      if (eq <= 0 || eq === m.length - 1) fail(`--map ${m}: want PREFIX=DIR`);
      opts.maps.push({ prefix: m.slice(0, eq), dir: m.slice(eq + 1) });
    } else fail(`unknown argument ${a} (usage: --metadata FILE [--map PREFIX=DIR ...] [--rows | --columns NAME[,NAME...]])`);
  }
  if (!opts.metadata) fail('--metadata is required');
  opts.maps.sort((x, y) => y.prefix.length - x.prefix.length);
  return opts;
}

// localPath maps a location of the table to a local file path: by the
// longest --map prefix it starts with, else as a file: URI (percent-decoded,
// as iceberg-go reads it) or an absolute path.
function localPath(location, maps) {
  for (const m of maps) {
    if (location.startsWith(m.prefix)) return path.join(m.dir, location.slice(m.prefix.length));
  }
  if (/^file:/i.test(location)) {
    try {
      return fileURLToPath(location);
    } catch (e) {
      throw new Error(`location ${location}: ${e.message}`);
    }
  }
  if (!path.isAbsolute(location)) {
    throw new Error(`location ${location} is not a local path (give a --map for its prefix)`);
  }
  return location;
}

// parseMetadata parses the metadata JSON with every integer of 16 or more
// digits as a string: snapshot ids exceed 2^53. Shorter integers are exact
// as numbers.
function parseMetadata(file, maps) {
  let text;
  try {
    text = fs.readFileSync(localPath(file, maps), 'utf8');
  } catch (e) {
    fail(`metadata ${file}: ${readError(e)}`);
  }
  const quoted = text.replace(/("(?:[^"\\]|\\.)*")|(-?\d{16,})(?![.eE\d])/g,
    (all, str, num) => (str !== undefined ? str : `"${num}"`));
  try {
    return JSON.parse(quoted);
  } catch (e) {
    fail(`metadata ${file}: not JSON: ${e.message}`);
  }
}

// str returns an id from the metadata JSON or Avro as a string, null when
// absent.
function str(v) {
  return v === undefined || v === null ? null : String(v);
}

// num converts a count (BigInt from Avro) to a number, null when absent.
function num(v) {
  return v === undefined || v === null ? null : Number(v);
}

// plain turns an Avro value into JSON-friendly form: BigInt as a string,
// bytes as hex.
function plain(v) {
  if (typeof v === 'bigint') return v.toString();
  if (Buffer.isBuffer(v)) return v.toString('hex');
  if (Array.isArray(v)) return v.map(plain);
  if (v !== null && typeof v === 'object') {
    return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, plain(x)]));
  }
  return v;
}

// bigLongType is Avro long decoded as BigInt, so no id loses precision.
function bigLongType(avsc) {
  return avsc.types.LongType.__with({
    fromBuffer: (buf) => buf.readBigInt64LE(),
    toBuffer: (n) => {
      const buf = Buffer.alloc(8);
      buf.writeBigInt64LE(BigInt(n));
      return buf;
    },
    fromJSON: BigInt,
    toJSON: Number,
    isValid: (n) => typeof n === 'bigint',
    compare: (a, b) => (a === b ? 0 : a < b ? -1 : 1),
  });
}

// readError describes an error of reading a file: "missing" for ENOENT.
function readError(e) {
  return e.code === 'ENOENT' ? 'missing' : e.message;
}

// readAvro returns the records and the header metadata (strings) of the
// Avro object container file at location.
function readAvro(avsc, longType, location, maps, what) {
  let buf;
  let file = location;
  try {
    file = localPath(location, maps);
    buf = fs.readFileSync(file);
  } catch (e) {
    const local = file !== location ? ` (${file})` : '';
    return Promise.reject(new Error(`${what} ${location}${local}: ${readError(e)}`));
  }
  return new Promise((resolve, reject) => {
    const records = [];
    let meta = {};
    const dec = new avsc.streams.BlockDecoder({
      parseHook: (schema) => avsc.Type.forSchema(schema, {
        typeHook: (s) => (s === 'long' || (s && s.type === 'long') ? longType : undefined),
      }),
    });
    dec.on('metadata', (type, codec, header) => {
      for (const [k, v] of Object.entries(header.meta)) meta[k] = v.toString();
    });
    dec.on('data', (r) => records.push(r));
    dec.on('error', (e) => reject(new Error(`${what} ${location}: not readable Avro: ${e.message}`)));
    dec.on('end', () => resolve({ records, meta }));
    dec.end(buf);
  });
}

// snapshotsOf lists the snapshots of the metadata.
function snapshotsOf(md) {
  return (md.snapshots || []).map((s) => ({
    id: str(s['snapshot-id']),
    parent: str(s['parent-snapshot-id']),
    sequence_number: num(s['sequence-number']),
    timestamp_ms: num(s['timestamp-ms']),
    operation: s.summary ? s.summary.operation || null : null,
    summary: s.summary || {},
    manifest_list: s['manifest-list'] || null,
  }));
}

// currentSnapshot returns the current snapshot of the metadata, null for
// a table without one.
function currentSnapshot(md, snapshots, errors) {
  const cur = str(md['current-snapshot-id']);
  if (cur === null || cur === '-1') return null;
  const snap = snapshots.find((s) => s.id === cur);
  if (!snap) fail(`metadata: current-snapshot-id ${cur} is not among the snapshots`);
  const main = md.refs && md.refs.main ? str(md.refs.main['snapshot-id']) : null;
  if (main !== null && main !== cur) {
    errors.push(`metadata: refs.main is at snapshot ${main}, current-snapshot-id is ${cur}`);
  }
  if (!snap.manifest_list) {
    fail(`snapshot ${cur} has no manifest-list (v1 tables that list manifests inline are not supported)`);
  }
  return snap;
}

const entryStatus = { 0: 'EXISTING', 1: 'ADDED', 2: 'DELETED' };

// checkManifestCounts compares a manifest's entries with the counts the
// manifest list gives for it (v1 names the file counts
// added_data_files_count and so on).
function checkManifestCounts(mf, entries, errors) {
  const counted = { 0: 0, 1: 0, 2: 0 };
  const rows = { 0: 0, 1: 0, 2: 0 };
  for (const e of entries) {
    counted[e.status] += 1;
    rows[e.status] += Number(e.data_file.record_count);
  }
  const want = [
    ['added_files_count', counted[1]], ['existing_files_count', counted[0]], ['deleted_files_count', counted[2]],
    ['added_rows_count', rows[1]], ['existing_rows_count', rows[0]], ['deleted_rows_count', rows[2]],
  ];
  for (const [field, got] of want) {
    const listed = num(mf[field] ?? mf[field.replace('_files_', '_data_files_')]);
    if (listed !== null && listed !== got) {
      errors.push(`manifest ${mf.manifest_path}: ${got} by its entries, the manifest list says ${field} ${listed}`);
    }
  }
}

// liveFiles reads the manifest list of snap and its manifests and returns
// the entries that are not DELETED.
async function liveFiles(ctx, snap) {
  const { avsc, longType, maps, errors } = ctx;
  const list = await readAvro(avsc, longType, snap.manifest_list, maps, 'manifest list');
  const files = [];
  for (const mf of list.records) {
    const content = num(mf.content) || 0;
    if (content !== 0) {
      fail(`manifest ${mf.manifest_path} holds delete files (content ${content}): delete files are not supported`);
    }
    const m = await readAvro(avsc, longType, mf.manifest_path, maps, 'manifest');
    if (m.meta.content && m.meta.content !== 'data') {
      fail(`manifest ${mf.manifest_path} holds ${m.meta.content}: delete files are not supported`);
    }
    for (const e of m.records) {
      const df = e.data_file;
      if (!df || !(e.status in entryStatus)) fail(`manifest ${mf.manifest_path}: an entry without data_file or with status ${e.status}`);
      if (num(df.content)) fail(`manifest ${mf.manifest_path}: ${df.file_path} is a delete file (content ${df.content}): delete files are not supported`);
      if (String(df.file_format).toUpperCase() !== 'PARQUET') fail(`data file ${df.file_path}: format ${df.file_format} is not supported (Parquet only)`);
    }
    checkManifestCounts(mf, m.records, errors);
    for (const e of m.records.filter((x) => x.status !== 2)) {
      const df = e.data_file;
      files.push({
        path: df.file_path,
        records: num(df.record_count),
        size: num(df.file_size_in_bytes),
        partition: plain(df.partition || {}),
        status: entryStatus[e.status],
        snapshot_id: str(e.snapshot_id === null || e.snapshot_id === undefined ? mf.added_snapshot_id : e.snapshot_id),
        manifest: mf.manifest_path,
      });
    }
  }
  return files;
}

// sqlString quotes s as a SQL string literal.
function sqlString(s) {
  return `'${s.replace(/'/g, "''")}'`;
}

// selectList is the select list of columns (a list of quoted names, or
// *) for a data file: a column the file lacks (a file written before the
// column was added to the table) reads as NULL, as Iceberg readers do.
// Columns are matched by name.
async function selectList(con, from, columns) {
  if (columns === '*') return columns;
  const have = new Set((await con.runAndReadAll(`DESCRIBE SELECT * FROM ${from}`)).getRowObjectsJson().map((r) => r.column_name));
  return columns.split(', ').map((q) => (have.has(q.slice(1, -1)) ? q : `NULL AS ${q}`)).join(', ');
}

// readDataFile checks one data file against its entry and returns its row
// count (null when unreadable) and, with rows, its rows.
async function readDataFile(ctx, f, withRows) {
  const { con, maps, errors, columns } = ctx;
  let local;
  try {
    local = localPath(f.path, maps);
  } catch (e) {
    errors.push(`data file ${f.path}: ${e.message}`);
    return { count: null, rows: [] };
  }
  try {
    const size = fs.statSync(local).size;
    if (size !== f.size) errors.push(`data file ${f.path}: ${size} bytes, its manifest entry says ${f.size}`);
  } catch (e) {
    errors.push(`data file ${f.path}: ${e.code === 'ENOENT' ? `missing (${local})` : e.message}`);
    return { count: null, rows: [] };
  }
  const from = `read_parquet(${sqlString(local)})`;
  let count;
  let rows = [];
  try {
    if (withRows) {
      rows = (await con.runAndReadAll(`SELECT ${await selectList(con, from, columns)} FROM ${from}`)).getRowObjectsJson();
      count = rows.length;
    } else {
      count = Number((await con.runAndReadAll(`SELECT count(*) AS n FROM ${from}`)).getRowObjectsJson()[0].n);
    }
  } catch (e) {
    errors.push(`data file ${f.path}: DuckDB cannot read it: ${String(e.message).split('\n')[0]}`);
    return { count: null, rows: [] };
  }
  if (count !== f.records) errors.push(`data file ${f.path}: ${count} rows, its manifest entry says record_count ${f.records}`);
  return { count, rows };
}

// checkSummary compares the current snapshot's summary totals with its
// live files.
function checkSummary(snap, files, errors) {
  const totals = [
    ['total-data-files', files.length],
    ['total-records', files.reduce((n, f) => n + f.records, 0)],
    ['total-files-size', files.reduce((n, f) => n + f.size, 0)],
  ];
  for (const [key, got] of totals) {
    const v = snap.summary[key];
    if (v !== undefined && Number(v) !== got) {
      errors.push(`snapshot ${snap.id}: summary ${key} ${v}, its live files give ${got}`);
    }
  }
}

async function main() {
  const opts = parseArgs(process.argv.slice(2));
  const require = requireModules();
  const avsc = require('avsc');
  const { DuckDBInstance } = require('@duckdb/node-api');

  const md = parseMetadata(opts.metadata, opts.maps);
  const version = num(md['format-version']);
  if (version !== 1 && version !== 2) fail(`metadata ${opts.metadata}: format version ${md['format-version']} is not supported (1 or 2)`);
  const errors = [];
  const snapshots = snapshotsOf(md);
  const snap = currentSnapshot(md, snapshots, errors);
  const out = {
    format_version: version,
    current_snapshot_id: snap ? snap.id : null,
    snapshots,
    files: [],
    duplicate_paths: [],
    rows: 0,
    records_by_file: {},
    errors,
  };
  if (opts.rows) out.data = [];
  if (snap) {
    const ctx = { avsc, longType: bigLongType(avsc), maps: opts.maps, errors, columns: opts.columns };
    out.files = await liveFiles(ctx, snap);
    checkSummary(snap, out.files, errors);
    const seen = new Map();
    for (const f of out.files) seen.set(f.path, (seen.get(f.path) || 0) + 1);
    out.duplicate_paths = [...seen].filter(([, n]) => n > 1).map(([p]) => p).sort();

    const db = await DuckDBInstance.create(':memory:', { autoinstall_known_extensions: 'false' });
    ctx.con = await db.connect();
    const read = new Map();
    for (const f of out.files) {
      if (!read.has(f.path)) read.set(f.path, await readDataFile(ctx, f, opts.rows));
      const r = read.get(f.path);
      out.records_by_file[f.path] = r.count;
      out.rows += r.count || 0;
      if (opts.rows) for (const row of r.rows) out.data.push(row);
    }
  }
  process.stdout.write(JSON.stringify(out) + '\n');
}

main().catch((e) => fail(e && e.message ? e.message : e));
