-- The options tables checked at the public boundary: a public name -> the
-- position of its options table (as the caller counts its arguments, no
-- self) and the keys it takes. init.lua's wrappers raise through
-- errors.options for a key not listed ("ember.<name>: unknown option 'k'
-- (known: ...)") and for an options table that is not a table, before the
-- function runs. A function that checks its own options (most do, where it
-- reads them) needs no entry; spec/arguments_spec.lua walks every public
-- name with an unknown option, so a gap shows there.
return {
  ["ember.distributed.all_reduce"] = { 3, { "async" } },
  ["ember.distributed.broadcast"] = { 3, { "async" } },
  ["ember.distributed.all_gather"] = { 2, { "async" } },
  ["ember.distributed.make_allreduce_cb"] = { 2, { "bucket_mb" } },
}
