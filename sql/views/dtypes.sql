-- Element types: how many bytes one element of each takes, for every spelling the
-- formats use (c10d / Kineto `dtype`, C++ `Input type`, execution-trace tensor types,
-- Horovod's numpy-style names).

-- Bytes per element, the ONE dtype table: c10d dtype names (`Float`,
-- `BFloat16`, kernel `dtype` arg) and the C++ type names of `Input type`
-- (`float`, `long int`, `c10::Half`), keyed by `dtype_key()`.
CREATE OR REPLACE VIEW dtype_sizes AS
SELECT * FROM (VALUES
  ('float', 4), ('float32', 4), ('int', 4), ('int32', 4), ('uint32', 4), ('unsigned int', 4),
  ('double', 8), ('float64', 8), ('long', 8), ('long int', 8), ('long long', 8),
  ('int64', 8), ('uint64', 8), ('unsigned long', 8), ('complexfloat', 8), ('complex<float>', 8),
  ('half', 2), ('float16', 2), ('bfloat16', 2), ('bf16', 2), ('short', 2), ('short int', 2),
  ('int16', 2), ('uint16', 2), ('unsigned short', 2), ('complexhalf', 4), ('complex<half>', 4),
  ('byte', 1), ('char', 1), ('bool', 1), ('int8', 1), ('uint8', 1), ('signed char', 1),
  ('unsigned char', 1), ('float8_e4m3fn', 1), ('float8_e5m2', 1), ('float8_e4m3fnuz', 1),
  ('float8_e5m2fnuz', 1),
  ('complexdouble', 16), ('complex<double>', 16)
) AS t(dtype_key, dtype_bytes);

-- 'c10::BFloat16' -> 'bfloat16', 'Float' -> 'float', 'long int' -> 'long int'.
CREATE OR REPLACE MACRO dtype_key(t) AS
lower(trim(regexp_replace(t, '^(c10::|at::|torch\.)', '')));
