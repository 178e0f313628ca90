-- API reference: ember.io, ember.plot, ember.progress (see lua/ember/doc/init.lua for the format)
return [==[
## `ember.io`: checkpoints

Tensors to and from files in the safetensors format, written atomically and
validated before anything is allocated when read, through the C core's codec
(the C API's `ember_st_save`, `ember_st_open`). Details: docs/io_data.md.

### `ember.save(path, tensors, metadata?)`, `ember.io.save(path, tensors, metadata?)`
Writes a table name -> tensor (`model:state_dict()`) and optional string
metadata to `path` atomically (a temporary file renamed over it); returns
`path`.

### `ember.load(path, opts?)`, `ember.io.load(path, opts?)`
Reads a safetensors file: the table name -> tensor and the metadata table;
`opts = {device =}`. A damaged file raises `ember.load: <path>: <what>`.

### `ember.io.header(path)`
The header alone: name -> `{dtype, shape, data_offsets}`, and the metadata.

### `ember.io.json`
The strict JSON codec (RFC 8259) of the structure of nested tables that
`ember.save` keeps in the metadata (the codec in C reads the header by the same
rules, with the same messages).

### `ember.io.json.decode(s)`
A Lua value from JSON text: objects and arrays become tables marked with
`json.OBJECT`/`json.ARRAY`, `null` becomes `json.null`; anything not strict
JSON raises `ember.io.json.decode: invalid JSON: <what> at byte <k>` (called
by ember's own code, such as `ember.load`, the error is worded by that call).

### `ember.io.json.encode(v)`
Compact JSON text of a Lua value (object keys sorted).

### `ember.io.json.encode_string(s)`
`s` as a JSON string literal, quoted and escaped.

### `ember.io.json.valid_utf8(s)`
True when `s` is valid UTF-8.

### `ember.io.json.null`
The value standing for JSON's `null`.

### `ember.io.json.OBJECT`, `ember.io.json.ARRAY`
Metatables that mark a table as a JSON object or array (so `{}` and `[]`
stay apart).

### `ember.io.DTYPES`
The safetensors dtype names and ember's (`F32 = "float32"`, ...).

### `ember.io.MAX_HEADER`
The largest header `load` accepts, in bytes (100 MB).

## `ember.plot`: SVG line plots

### `ember.plot.svg(path, series, opts?)`
Writes a line plot of named series (`{loss = {...}, acc = {...}}`) as a
standalone SVG file and returns its text (`path` nil: only the text);
`opts = {title, xlabel, ylabel, y2label, width = 640, height = 400, logy,
xmin, xmax, ymin, ymax, y2min, y2max, colors, name}` (an unknown key raises).

### `ember.plot.ticks(lo, hi, n?, min_step?)`
Round tick positions (1, 2 or 5 x 10^k steps) covering `[lo, hi]`, about
`n` (5) of them, spaced at least `min_step` (1 for integer data such as
epochs).

### `ember.plot.escape(s)`
`s` with XML's special characters escaped.

### `ember.plot.COLORS`
The default series colours.

## `ember.progress`: progress bars

`ember.progress(total, opts?)` is `ember.progress.new`.

### `ember.progress.new(total, opts?)`
A bar: `bar:update(k, {loss = ...})`, `bar:set_postfix(t)`,
`bar:set_description(s)`, `bar:close()`. Redrawn in place on a terminal,
plain lines otherwise; `opts = {desc, file, tty, columns, width, interval,
lines, log_interval, unit, clock}`.

### `ember.progress.Bar`
The class of bars (`ember.progress.new` makes them).

### `Bar:update(k?, postfix?)`
Advances the count by `k` (1) and remembers the `postfix` values
(`{loss = 0.12}`: numbers or one-element tensors); redraws when due.

### `Bar:set_postfix(postfix)`, `Bar:set_description(desc)`
Replaces the values shown after the rate, or the text before the bar (a
string, or nil for none).

### `Bar:line()`
The status text: `desc:  45%|####      | 450/1000 [00:03<00:04, 123.40 it/s, loss=0.12]`.

### `Bar:close()`
Prints the final state and ends the line.

### `ember.progress.format_time(seconds)`
`"04:05"` or `"1:02:03"`.

### `ember.progress.columns(fd?)`
The terminal's width: `$COLUMNS` when it is a positive number (a user's
override, as Python's shutil), else the width of the terminal on file
descriptor `fd`, else nil. A bar takes `opts.columns`, else this, else 80.

### `ember.progress.isatty(fd?)`
True when file descriptor `fd` (1) is a terminal.

### `ember.progress.now()`
Seconds from a monotonic clock.
]==]
