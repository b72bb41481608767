//! lakeflow's compiled part-file decoder (`lakeflow_native`): part files whose declared fields are
//! all flat scalars (string, long, int, double, float, boolean) decoded in one pass into Arrow
//! buffers, the record contract checked on the way (lakeflow/schema/records.py).
//!
//! It takes a file only when it is sure the exact path (Python's `json`, the contract record by
//! record) would take every record of it with the same values; it declines any other file — an
//! empty or malformed one, a record breaking the contract, anything it does not handle (a byte
//! order mark, a duplicate declared key, a lone surrogate, deep nesting) — and the caller parses
//! the declined files the other ways, which give the reasons.

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyBytes;
use std::collections::HashMap;

const MAX_DEPTH: usize = 512; // undeclared values nested deeper are declined (Python decides)
const MAX_NUMBER: usize = 4000; // digits: Python's int refuses more than 4,300

#[derive(Clone, Copy, PartialEq)]
enum Kind {
    Str,
    Long,
    Int,
    Double,
    Float,
    Bool,
}

struct Field {
    name: Vec<u8>,
    kind: Kind,
    required: bool,
    max_length: Option<usize>,
}

/// One declared field's values so far: one validity byte and one value a row.
struct Column {
    valid: Vec<u8>,
    nulls: usize,
    fixed: Vec<u8>, // little-endian values (bool: one byte a row)
    offsets: Vec<i64>,
    text: Vec<u8>,
}

impl Column {
    fn with_capacity(kind: Kind, rows: usize) -> Self {
        let width = match kind {
            Kind::Long | Kind::Double => 8,
            Kind::Int | Kind::Float => 4,
            Kind::Bool => 1,
            Kind::Str => 0,
        };
        let mut offsets = Vec::with_capacity(if kind == Kind::Str { rows + 1 } else { 1 });
        offsets.push(0);
        Column {
            valid: Vec::with_capacity(rows),
            nulls: 0,
            fixed: Vec::with_capacity(rows * width),
            offsets,
            text: Vec::with_capacity(if kind == Kind::Str { rows * 16 } else { 0 }),
        }
    }

    fn null(&mut self, kind: Kind) {
        self.valid.push(0);
        self.nulls += 1;
        match kind {
            Kind::Str => self.offsets.push(self.text.len() as i64),
            Kind::Long | Kind::Double => self.fixed.extend_from_slice(&[0; 8]),
            Kind::Int | Kind::Float => self.fixed.extend_from_slice(&[0; 4]),
            Kind::Bool => self.fixed.push(0),
        }
    }

    /// Back to ``rows`` rows (a declined file's are taken back).
    fn truncate(&mut self, rows: usize, kind: Kind) {
        self.nulls -= self.valid[rows..].iter().filter(|v| **v == 0).count();
        self.valid.truncate(rows);
        match kind {
            Kind::Str => {
                self.offsets.truncate(rows + 1);
                self.text.truncate(self.offsets[rows] as usize);
            }
            Kind::Long | Kind::Double => self.fixed.truncate(rows * 8),
            Kind::Int | Kind::Float => self.fixed.truncate(rows * 4),
            Kind::Bool => self.fixed.truncate(rows),
        }
    }
}

struct Decline;
type Step<T> = Result<T, Decline>;

struct Reader<'a> {
    s: &'a [u8],
    i: usize,
}

impl<'a> Reader<'a> {
    #[inline]
    fn ws(&mut self) {
        while self.i < self.s.len() && matches!(self.s[self.i], b' ' | b'\t' | b'\n' | b'\r') {
            self.i += 1;
        }
    }

    #[inline]
    fn peek(&self) -> Step<u8> {
        self.s.get(self.i).copied().ok_or(Decline)
    }

    #[inline]
    fn expect(&mut self, c: u8) -> Step<()> {
        if self.peek()? != c {
            return Err(Decline);
        }
        self.i += 1;
        Ok(())
    }

    fn literal(&mut self, word: &[u8]) -> Step<()> {
        if self.s.len() - self.i < word.len() || &self.s[self.i..self.i + word.len()] != word {
            return Err(Decline);
        }
        self.i += word.len();
        Ok(())
    }

    /// A string's content (after its opening quote) appended to ``out``, unescaped; the text is
    /// UTF-8 already (checked once per file). Control characters and lone surrogates decline.
    fn string(&mut self, out: &mut Vec<u8>) -> Step<()> {
        loop {
            let start = self.i;
            let mut ascii = true;
            while self.i < self.s.len() {
                let c = self.s[self.i];
                if c == b'"' || c == b'\\' || c < 0x20 {
                    break;
                }
                ascii &= c < 0x80;
                self.i += 1;
            }
            let run = &self.s[start..self.i];
            if !ascii {
                std::str::from_utf8(run).map_err(|_| Decline)?; // (outside strings, such bytes are no JSON)
            }
            out.extend_from_slice(run);
            match self.peek()? {
                b'"' => {
                    self.i += 1;
                    return Ok(());
                }
                b'\\' => {
                    self.i += 1;
                    let e = self.peek()?;
                    self.i += 1;
                    let plain = match e {
                        b'"' => b'"',
                        b'\\' => b'\\',
                        b'/' => b'/',
                        b'b' => 8,
                        b'f' => 12,
                        b'n' => b'\n',
                        b'r' => b'\r',
                        b't' => b'\t',
                        b'u' => {
                            let mut code = self.hex4()?;
                            if (0xDC00..0xE000).contains(&code) {
                                return Err(Decline);
                            }
                            if (0xD800..0xDC00).contains(&code) {
                                self.literal(b"\\u")?;
                                let low = self.hex4()?;
                                if !(0xDC00..0xE000).contains(&low) {
                                    return Err(Decline);
                                }
                                code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00);
                            }
                            let ch = char::from_u32(code).ok_or(Decline)?;
                            let mut buf = [0u8; 4];
                            out.extend_from_slice(ch.encode_utf8(&mut buf).as_bytes());
                            continue;
                        }
                        _ => return Err(Decline),
                    };
                    out.push(plain);
                }
                _ => return Err(Decline), // a raw control character
            }
        }
    }

    /// An object's key (after its opening quote): the text itself when it has no escape, else
    /// unescaped into ``scratch``.
    fn key<'k>(&mut self, scratch: &'k mut Vec<u8>) -> Step<&'k [u8]>
    where
        'a: 'k,
    {
        let start = self.i;
        let mut j = start;
        let mut ascii = true;
        while j < self.s.len() && self.s[j] != b'"' && self.s[j] != b'\\' && self.s[j] >= 0x20 {
            ascii &= self.s[j] < 0x80;
            j += 1;
        }
        if j < self.s.len() && self.s[j] == b'"' {
            let key = &self.s[start..j];
            if !ascii {
                std::str::from_utf8(key).map_err(|_| Decline)?;
            }
            self.i = j + 1;
            return Ok(key);
        }
        scratch.clear();
        self.string(scratch)?;
        Ok(scratch.as_slice())
    }

    fn hex4(&mut self) -> Step<u32> {
        let digits = self.s.get(self.i..self.i + 4).ok_or(Decline)?;
        let mut code = 0u32;
        for d in digits {
            code = code * 16 + (*d as char).to_digit(16).ok_or(Decline)?;
        }
        self.i += 4;
        Ok(code)
    }

    /// A number's text, as JSON writes one; whether it is an integer (no fraction, no exponent).
    fn number(&mut self) -> Step<(&'a [u8], bool)> {
        let start = self.i;
        if self.peek()? == b'-' {
            self.i += 1;
        }
        match self.peek()? {
            b'0' => self.i += 1,
            b'1'..=b'9' => self.digits(),
            _ => return Err(Decline),
        }
        let mut integer = true;
        if self.s.get(self.i) == Some(&b'.') {
            self.i += 1;
            self.first_digit()?;
            integer = false;
        }
        if matches!(self.s.get(self.i), Some(b'e' | b'E')) {
            self.i += 1;
            if matches!(self.s.get(self.i), Some(b'+' | b'-')) {
                self.i += 1;
            }
            self.first_digit()?;
            integer = false;
        }
        if self.i - start > MAX_NUMBER {
            return Err(Decline);
        }
        Ok((&self.s[start..self.i], integer))
    }

    fn first_digit(&mut self) -> Step<()> {
        if !self.peek()?.is_ascii_digit() {
            return Err(Decline);
        }
        self.digits();
        Ok(())
    }

    #[inline]
    fn digits(&mut self) {
        while self.i < self.s.len() && self.s[self.i].is_ascii_digit() {
            self.i += 1;
        }
    }

    /// At a container's opening byte: passes it, and its ``close`` too when it is empty (true then).
    fn closes(&mut self, close: u8) -> Step<bool> {
        self.i += 1;
        self.ws();
        let empty = self.peek()? == close;
        if empty {
            self.i += 1;
        }
        Ok(empty)
    }

    /// After a container's element: true past a comma (another element follows), false past ``close``.
    fn another(&mut self, close: u8) -> Step<bool> {
        self.ws();
        match self.peek()? {
            b',' => {
                self.i += 1;
                self.ws();
                Ok(true)
            }
            c if c == close => {
                self.i += 1;
                Ok(false)
            }
            _ => Err(Decline),
        }
    }

    /// Any JSON value, checked and passed over (an undeclared field's).
    fn skip(&mut self, depth: usize, scratch: &mut Vec<u8>) -> Step<()> {
        if depth > MAX_DEPTH {
            return Err(Decline);
        }
        match self.peek()? {
            b'"' => {
                self.i += 1;
                scratch.clear();
                self.string(scratch)
            }
            b'{' => {
                let mut more = !self.closes(b'}')?;
                while more {
                    self.expect(b'"')?;
                    scratch.clear();
                    self.string(scratch)?;
                    self.ws();
                    self.expect(b':')?;
                    self.ws();
                    self.skip(depth + 1, scratch)?;
                    more = self.another(b'}')?;
                }
                Ok(())
            }
            b'[' => {
                let mut more = !self.closes(b']')?;
                while more {
                    self.skip(depth + 1, scratch)?;
                    more = self.another(b']')?;
                }
                Ok(())
            }
            b't' => self.literal(b"true"),
            b'f' => self.literal(b"false"),
            b'n' => self.literal(b"null"),
            _ => self.number().map(|_| ()),
        }
    }
}

/// An integer's text (no fraction, no exponent) within 64 bits.
fn integer(text: &[u8]) -> Step<i64> {
    let (negative, digits) = match text.first() {
        Some(b'-') => (true, &text[1..]),
        _ => (false, text),
    };
    if digits.len() > 19 {
        return Err(Decline);
    }
    let mut v: u64 = 0;
    for d in digits {
        v = v * 10 + u64::from(d - b'0');
    }
    if negative {
        if v > 1u64 << 63 {
            return Err(Decline);
        }
        Ok((v as i64).wrapping_neg())
    } else {
        i64::try_from(v).map_err(|_| Decline)
    }
}

/// A number as Python's ``float`` of its exact value: correctly rounded; an integer's zero is +0.
fn double(text: &[u8], is_integer: bool) -> Step<f64> {
    if is_integer && text.len() <= 16 {
        return integer(text).map(|v| v as f64); // exact below 2**53, and -0 is +0 as Python's int
    }
    // ASCII only (the number's grammar was checked)
    let v: f64 = std::str::from_utf8(text)
        .map_err(|_| Decline)?
        .parse()
        .map_err(|_| Decline)?;
    if is_integer && v == 0.0 {
        return Ok(0.0);
    }
    if v.is_finite() {
        Ok(v)
    } else {
        Err(Decline)
    }
}

struct Decoder<'f> {
    fields: &'f [Field],
    index: HashMap<&'f [u8], usize>,
    columns: Vec<Column>,
    rows: usize,
    undeclared: HashMap<Vec<u8>, u64>,
}

impl<'f> Decoder<'f> {
    /// One file's records appended; on a decline everything of the file is taken back.
    fn file(&mut self, blob: &[u8]) -> Step<usize> {
        let rows = self.rows;
        let mut seen_undeclared: Vec<(Vec<u8>, u64)> = Vec::new();
        let result = self.records(blob, &mut seen_undeclared);
        match result {
            Ok(n) => {
                for (name, count) in seen_undeclared {
                    *self.undeclared.entry(name).or_insert(0) += count;
                }
                Ok(n)
            }
            Err(Decline) => {
                for (column, field) in self.columns.iter_mut().zip(self.fields) {
                    column.truncate(rows, field.kind);
                }
                self.rows = rows;
                Err(Decline)
            }
        }
    }

    fn records(&mut self, blob: &[u8], undeclared: &mut Vec<(Vec<u8>, u64)>) -> Step<usize> {
        let mut r = Reader { s: blob, i: 0 };
        let mut scratch = Vec::new();
        r.ws();
        let mut n = 0;
        match r.peek()? {
            b'{' => {
                self.record(&mut r, &mut scratch, undeclared)?;
                n = 1;
            }
            b'[' => {
                let mut more = !r.closes(b']')?;
                while more {
                    if r.peek()? != b'{' {
                        return Err(Decline);
                    }
                    self.record(&mut r, &mut scratch, undeclared)?;
                    n += 1;
                    more = r.another(b']')?;
                }
            }
            _ => return Err(Decline),
        }
        r.ws();
        if r.i != blob.len() {
            return Err(Decline);
        }
        Ok(n)
    }

    fn record(
        &mut self,
        r: &mut Reader,
        scratch: &mut Vec<u8>,
        undeclared: &mut Vec<(Vec<u8>, u64)>,
    ) -> Step<()> {
        let mut seen = 0u64; // (at most 64 fields: see decode)
        let mut extra: Vec<Vec<u8>> = Vec::new();
        let mut hint = 0;
        let mut more = !r.closes(b'}')?;
        while more {
            r.expect(b'"')?;
            let key = r.key(scratch)?;
            let at = if hint < self.fields.len() && self.fields[hint].name == key {
                Some(hint)
            } else {
                self.index.get(key).copied()
            };
            r.ws();
            r.expect(b':')?;
            r.ws();
            match at {
                Some(k) => {
                    if seen & (1 << k) != 0 {
                        return Err(Decline); // a duplicate declared key: Python keeps the last
                    }
                    seen |= 1 << k;
                    hint = k + 1;
                    self.value(k, r)?;
                }
                None => {
                    if extra.iter().any(|e| e.as_slice() == key) {
                        return Err(Decline);
                    }
                    extra.push(key.to_vec());
                    let mut inner = Vec::new();
                    r.skip(0, &mut inner)?;
                }
            }
            more = r.another(b'}')?;
        }
        for (k, field) in self.fields.iter().enumerate() {
            if seen & (1 << k) == 0 {
                if field.required {
                    return Err(Decline);
                }
                self.columns[k].null(field.kind);
            }
        }
        self.rows += 1;
        for name in extra {
            match undeclared.iter_mut().find(|(n, _)| *n == name) {
                Some((_, count)) => *count += 1,
                None => undeclared.push((name, 1)),
            }
        }
        Ok(())
    }

    /// Field ``k``'s value, checked against its kind and appended to its column.
    fn value(&mut self, k: usize, r: &mut Reader) -> Step<()> {
        let field = &self.fields[k];
        let column = &mut self.columns[k];
        if r.peek()? == b'n' {
            r.literal(b"null")?;
            if field.required {
                return Err(Decline);
            }
            column.null(field.kind);
            return Ok(());
        }
        match field.kind {
            Kind::Str => {
                r.expect(b'"')?;
                let start = column.text.len();
                r.string(&mut column.text)?;
                if let Some(limit) = field.max_length {
                    let added = &column.text[start..];
                    if added.len() > limit
                        && added.iter().filter(|b| (**b & 0xC0) != 0x80).count() > limit
                    {
                        return Err(Decline);
                    }
                }
                column.offsets.push(column.text.len() as i64);
            }
            Kind::Long | Kind::Int => {
                let (text, is_integer) = r.number()?;
                if !is_integer {
                    return Err(Decline);
                }
                let v = integer(text)?;
                if field.kind == Kind::Long {
                    column.fixed.extend_from_slice(&v.to_le_bytes());
                } else {
                    let v = i32::try_from(v).map_err(|_| Decline)?;
                    column.fixed.extend_from_slice(&v.to_le_bytes());
                }
            }
            Kind::Double | Kind::Float => {
                let (text, is_integer) = r.number()?;
                let v = double(text, is_integer)?;
                if field.kind == Kind::Double {
                    column.fixed.extend_from_slice(&v.to_le_bytes());
                } else {
                    let f = v as f32;
                    if !f.is_finite() {
                        return Err(Decline);
                    }
                    column.fixed.extend_from_slice(&f.to_le_bytes());
                }
            }
            Kind::Bool => {
                let v = match r.peek()? {
                    b't' => r.literal(b"true").map(|_| 1u8)?,
                    b'f' => r.literal(b"false").map(|_| 0u8)?,
                    _ => return Err(Decline),
                };
                column.fixed.push(v);
            }
        }
        column.valid.push(1);
        Ok(())
    }
}

fn bits(bytes: &[u8]) -> Vec<u8> {
    let mut out = vec![0u8; bytes.len().div_ceil(8)];
    for (i, b) in bytes.iter().enumerate() {
        out[i / 8] |= (*b & 1) << (i % 8);
    }
    out
}

/// One column as Arrow buffers: ``(validity bitmap or None, values, offsets or None, nulls)``.
type Buffers = (Option<Vec<u8>>, Vec<u8>, Option<Vec<u8>>, usize);

fn buffers(column: Column, kind: Kind) -> Step<Buffers> {
    let validity = if column.nulls > 0 {
        Some(bits(&column.valid))
    } else {
        None
    };
    Ok(match kind {
        Kind::Str => {
            let mut offsets = Vec::with_capacity(column.offsets.len() * 4);
            for o in &column.offsets {
                offsets.extend_from_slice(&i32::try_from(*o).map_err(|_| Decline)?.to_le_bytes());
            }
            (validity, column.text, Some(offsets), column.nulls)
        }
        Kind::Bool => (validity, bits(&column.fixed), None, column.nulls),
        _ => (validity, column.fixed, None, column.nulls),
    })
}

type Columns<'py> = Vec<(
    Option<Bound<'py, PyBytes>>,
    Bound<'py, PyBytes>,
    Option<Bound<'py, PyBytes>>,
    usize,
)>;
type Decoded<'py> = (Vec<i64>, Option<Columns<'py>>, Vec<(String, u64)>);
type FieldSpec = (String, String, bool, Option<usize>);

fn declared_fields(fields: Vec<FieldSpec>) -> PyResult<Vec<Field>> {
    let mut declared = Vec::with_capacity(fields.len());
    for (name, kind, required, max_length) in fields {
        let kind = match kind.as_str() {
            "string" => Kind::Str,
            "long" => Kind::Long,
            "int" => Kind::Int,
            "double" => Kind::Double,
            "float" => Kind::Float,
            "boolean" => Kind::Bool,
            other => {
                return Err(PyValueError::new_err(format!(
                    "no native decoding of kind {other:?}"
                )))
            }
        };
        if declared.len() == 64 {
            return Err(PyValueError::new_err(
                "no native decoding of more than 64 fields",
            ));
        }
        declared.push(Field {
            name: name.into_bytes(),
            kind,
            required,
            max_length,
        });
    }
    Ok(declared)
}

/// Every file ``file(i)`` gives (None: unreadable, declined), decoded under ``declared``.
fn run<'b>(
    declared: &[Field],
    count: usize,
    rows_guess: usize,
    file: impl Fn(usize) -> Option<std::borrow::Cow<'b, [u8]>>,
) -> (Vec<i64>, Option<Vec<Buffers>>, HashMap<Vec<u8>, u64>) {
    let mut decoder = Decoder {
        fields: declared,
        index: declared
            .iter()
            .enumerate()
            .map(|(k, f)| (f.name.as_slice(), k))
            .collect(),
        columns: declared
            .iter()
            .map(|f| Column::with_capacity(f.kind, rows_guess))
            .collect(),
        rows: 0,
        undeclared: HashMap::new(),
    };
    let taken: Vec<i64> = (0..count)
        .map(|i| match file(i) {
            Some(blob) => decoder.file(&blob).map_or(-1, |n| n as i64),
            None => -1,
        })
        .collect();
    let columns: Step<Vec<Buffers>> = decoder
        .columns
        .into_iter()
        .zip(declared)
        .map(|(c, f)| buffers(c, f.kind))
        .collect();
    (taken, columns.ok(), decoder.undeclared)
}

fn to_python(
    py: Python<'_>,
    decoded: (Vec<i64>, Option<Vec<Buffers>>, HashMap<Vec<u8>, u64>),
) -> Decoded<'_> {
    let (mut taken, columns, undeclared) = decoded;
    let columns = match columns {
        Some(columns) => Some(
            columns
                .into_iter()
                .map(|(v, values, o, nulls)| {
                    (
                        v.map(|v| PyBytes::new(py, &v)),
                        PyBytes::new(py, &values),
                        o.map(|o| PyBytes::new(py, &o)),
                        nulls,
                    )
                })
                .collect(),
        ),
        None => {
            taken.iter_mut().for_each(|t| *t = -1);
            None
        }
    };
    let undeclared = undeclared
        .into_iter()
        .map(|(name, n)| (String::from_utf8(name).unwrap_or_default(), n))
        .collect();
    (taken, columns, undeclared)
}

/// Decode the part files ``blobs`` under ``fields`` (``(name, kind, required, maxLength or None)``,
/// kind one of string, long, int, double, float, boolean). Returns ``(taken, columns, undeclared)``:
/// each file's record count, or -1 where it declined the file; the taken files' rows, in file order,
/// one ``(validity, values, offsets, nulls)`` per field (validity None without nulls; offsets: int32,
/// strings only); the undeclared top-level fields of the taken records (name → records). None for
/// ``columns`` when their strings outgrow 32-bit offsets (nothing taken then).
#[pyfunction]
fn decode<'py>(
    py: Python<'py>,
    blobs: Vec<Bound<'py, PyBytes>>,
    fields: Vec<FieldSpec>,
) -> PyResult<Decoded<'py>> {
    let declared = declared_fields(fields)?;
    let slices: Vec<&[u8]> = blobs.iter().map(|b| b.as_bytes()).collect();
    let rows_guess = slices.iter().map(|b| b.len()).sum::<usize>() / (16 * declared.len().max(1));
    let decoded = py.allow_threads(|| {
        run(&declared, slices.len(), rows_guess, |i| {
            Some(slices[i].into())
        })
    });
    Ok(to_python(py, decoded))
}

/// :func:`decode` of the local files ``paths``, read here (a file that cannot be read is declined:
/// the caller reads it, and says why).
#[pyfunction]
fn decode_files(
    py: Python<'_>,
    paths: Vec<std::path::PathBuf>,
    fields: Vec<FieldSpec>,
) -> PyResult<Decoded<'_>> {
    let declared = declared_fields(fields)?;
    let decoded = py.allow_threads(|| {
        run(&declared, paths.len(), 0, |i| {
            std::fs::read(&paths[i]).ok().map(Into::into)
        })
    });
    Ok(to_python(py, decoded))
}

#[pymodule]
fn lakeflow_native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(decode, m)?)?;
    m.add_function(wrap_pyfunction!(decode_files, m)?)
}
