-- Element types: how many bytes one element of each takes, for every spelling the
-- formats use (c10d / Kineto `dtype`, C++ `Input type`, execution-trace tensor types,
-- Horovod's numpy-style names).

-- Bytes per element, the ONE dtype table: c10d dtype names (`Float`,
-- `BFloat16`, kernel `dtype` arg) and the C++ type names of `Input type`
-- (`float`, `long int`, `c10::Half`), keyed by `dtype_key()`, and XLA's primitive
-- types (`f32`, `bf16`, `s8`, `pred`, ... as in `bf16[8,1024]`; xla.sql). A map, so
-- that scalar code (the lambdas over XLA shapes) can look a type up: `dtype_bytes()`;
-- `dtype_sizes` is the same table as rows, for joins.
CREATE OR REPLACE MACRO _dtype_size_map() AS MAP {
  'float': 4, 'float32': 4, 'int': 4, 'int32': 4, 'uint32': 4, 'unsigned int': 4,
  'double': 8, 'float64': 8, 'long': 8, 'long int': 8, 'long long': 8,
  'int64': 8, 'uint64': 8, 'unsigned long': 8, 'complexfloat': 8, 'complex<float>': 8,
  'half': 2, 'float16': 2, 'bfloat16': 2, 'bf16': 2, 'short': 2, 'short int': 2,
  'int16': 2, 'uint16': 2, 'unsigned short': 2, 'complexhalf': 4, 'complex<half>': 4,
  'byte': 1, 'char': 1, 'bool': 1, 'int8': 1, 'uint8': 1, 'signed char': 1,
  'unsigned char': 1, 'float8_e4m3fn': 1, 'float8_e5m2': 1, 'float8_e4m3fnuz': 1,
  'float8_e5m2fnuz': 1,
  'complexdouble': 16, 'complex<double>': 16,
  -- XLA primitive types (bf16 is above); its f8 types are 1 byte (`dtype_bytes`)
  'pred': 1, 's8': 1, 'u8': 1, 'f16': 2, 's16': 2, 'u16': 2,
  'f32': 4, 's32': 4, 'u32': 4, 'f64': 8, 's64': 8, 'u64': 8, 'c64': 8, 'c128': 16,
  'token': 0
};

CREATE OR REPLACE VIEW dtype_sizes AS
SELECT unnest(map_keys(m)) AS dtype_key, unnest(map_values(m)) AS dtype_bytes
FROM (SELECT _dtype_size_map() AS m);

-- Bytes of one element of type `k` (a `dtype_key()` or a lower-case XLA type); every
-- XLA f8 type (f8e4m3fn, f8e5m2, f8e4m3b11fnuz, ...) is 1 byte. NULL when unknown.
CREATE OR REPLACE MACRO dtype_bytes(k) AS
CASE WHEN k LIKE 'f8%' THEN 1 ELSE _dtype_size_map()[k] END;

-- 'c10::BFloat16' -> 'bfloat16', 'Float' -> 'float', 'long int' -> 'long int'.
CREATE OR REPLACE MACRO dtype_key(t) AS
lower(trim(regexp_replace(t, '^(c10::|at::|torch\.)', '')));
