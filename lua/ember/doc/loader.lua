-- API reference: finding libember (lua/ember/loader.lua; docs/hosts.md)
-- (see lua/ember/doc/init.lua for the format)
return [==[
## `ember.loader`: finding libember

`require("ember")` loads libember through the FFI. A host names the library
from Lua, before the first `require("ember")` of each Lua state, with
`require("ember.loader").set_library(path)` (the module needs no libember);
otherwise it is looked for in the order `ember.loader.candidates()` gives:
`$EMBER_LIB` alone when set, then the path an install recorded
(`ember/config.lua`), `libember.so` beside the Lua files (a vendored copy),
the source checkout's `build/`, the install prefix's `lib/`, and the system
linker's path. In LÖVE, beside the Lua files means through `love.filesystem`
(the game's folder or save folder), then beside a `.love` archive or fused
game. When none loads, the error lists every path tried and why each
failed. How each host ships it: `docs/hosts.md`.

### `ember.loader.set_library(path)`
Makes `require("ember")` load `path`, a libember file or the folder holding
`libember.so` (with `libember_cuda.so` beside it for the CUDA backend), and
nothing else; returns the file's path. `$EMBER_LIB`, when set, still comes
first. Called after ember is loaded in this Lua state it accepts only the
path already loaded and raises otherwise.

### `ember.loader.candidates()`
The paths `require("ember")` tries, in order: a list of
`{path =, from =, problem =}` (`from` says where each came from; `problem`,
when set, why the path cannot be loaded, e.g. a library inside a `.love`).

### `ember.loader.loaded()`
The path libember was loaded from in this Lua state (`ember._libpath`), or
nil before `require("ember")`.
]==]
