package lakeflow.flink;

import java.io.IOException;
import java.io.Serializable;
import java.math.BigDecimal;
import java.time.DateTimeException;
import java.time.LocalDate;
import java.util.Iterator;
import java.util.Map;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.JsonNode;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.ObjectMapper;

/**
 * The record contract of lakeflow/schema/records.py on the JVM, compiled from its JSON
 * ({@code TableSchema.contract_json()}: {@code {"fields": [{"name", "required", "type": {"kind", …}}]}}).
 * {@link #check} gives exactly that module's reasons: the first failing field in declaration order,
 * named by its path ({@code gps.lat}, {@code accel[2]}, {@code tags.site}); nothing is coerced.
 * Numbers are expected as Jackson reads them with {@code USE_BIG_DECIMAL_FOR_FLOATS} (exact).
 * tests/contracts/records.json holds the cases both implementations are checked against.
 */
final class RecordContract implements Serializable {

    private static final long serialVersionUID = 1L;

    private final Struct record;

    /** @param contract the contract's JSON; IllegalArgumentException when it is not one */
    RecordContract(String contract) {
        JsonNode root;
        try {
            root = new ObjectMapper().readTree(contract);
        } catch (IOException exc) {
            throw new IllegalArgumentException("the record contract is not JSON: " + exc.getMessage());
        }
        if (root == null || !root.path("fields").isArray()) {
            throw new IllegalArgumentException("the record contract has no fields");
        }
        record = new Struct(root.get("fields"));
    }

    /** Invalid with the reason unless {@code object} (a JSON object) fits the contract. */
    void check(JsonNode object) throws Invalid {
        record.members(object, "");
    }

    /** What a JSON value is, for a reason: {@code a string}, {@code an integer}, {@code an object}… */
    static String got(JsonNode value) {
        if (value.isBoolean()) {
            return "a boolean";
        }
        if (value.isIntegralNumber()) {
            return "an integer";
        }
        if (value.isNumber()) {
            return "a number";
        }
        if (value.isTextual()) {
            return "a string";
        }
        if (value.isArray()) {
            return "an array";
        }
        return value.isObject() ? "an object" : "null";
    }

    /** A value breaks the contract; the message is the reason. */
    static final class Invalid extends IOException {
        private static final long serialVersionUID = 1L;

        Invalid(String reason) {
            super(reason);
        }
    }

    private static Type compile(JsonNode spec) {
        String kind = spec.path("kind").asText();
        switch (kind) {
            case "string":
                return new Text(spec.has("maxLength") ? spec.get("maxLength").asInt() : -1);
            case "long":
                return new Integral(true);
            case "int":
                return new Integral(false);
            case "double":
            case "float":
                return new Floating(kind);
            case "boolean":
                return new Bool();
            case "decimal":
                return new Decimal(spec.path("precision").asInt(), spec.path("scale").asInt());
            case "date":
                return new Day();
            case "timestamptz":
            case "timestamp":
                return new Instant(kind);
            case "struct":
                return new Struct(spec.path("fields"));
            case "list":
                return new Sequence(compile(spec.path("items")), spec.path("itemsRequired").asBoolean(false),
                        spec.has("maxItems") ? spec.get("maxItems").asInt() : -1);
            case "map":
                return new Mapping(compile(spec.path("values")), spec.path("valuesRequired").asBoolean(false));
            default:
                throw new IllegalArgumentException("unknown kind '" + kind + "' in the record contract");
        }
    }

    /** One contract type: {@link #check} raises Invalid with the reason. */
    private abstract static class Type implements Serializable {
        private static final long serialVersionUID = 1L;
        private final String expected;

        Type(String expected) {
            this.expected = expected;
        }

        abstract void check(JsonNode value, String path) throws Invalid;

        Invalid fail(String path, JsonNode value) {
            return new Invalid("field " + path + ": expected " + expected + ", got " + got(value));
        }
    }

    private static final class Text extends Type {
        private static final long serialVersionUID = 1L;
        private final int maxLength;

        Text(int maxLength) {
            super("a string");
            this.maxLength = maxLength;
        }

        @Override
        void check(JsonNode value, String path) throws Invalid {
            if (!value.isTextual()) {
                throw fail(path, value);
            }
            String text = value.textValue();
            if (maxLength >= 0 && text.codePointCount(0, text.length()) > maxLength) {
                throw new Invalid("field " + path + ": longer than " + maxLength + " characters");
            }
        }
    }

    private static final class Integral extends Type {
        private static final long serialVersionUID = 1L;
        private final boolean wide;

        /** @param wide a long (64 bits), else an int (32) */
        Integral(boolean wide) {
            super("an integer");
            this.wide = wide;
        }

        @Override
        void check(JsonNode value, String path) throws Invalid {
            if (!value.isIntegralNumber()) {
                throw fail(path, value);
            }
            if (wide ? !value.canConvertToLong() : !value.canConvertToInt()) {
                throw new Invalid("field " + path + ": integer out of range for " + (wide ? "a long" : "an int"));
            }
        }
    }

    private static final class Floating extends Type {
        private static final long serialVersionUID = 1L;
        private final String kind;

        Floating(String kind) {
            super("a number");
            this.kind = kind;
        }

        @Override
        void check(JsonNode value, String path) throws Invalid {
            if (!value.isNumber()) {
                throw fail(path, value);
            }
            // correctly rounded, as Python's float() of an int or a Decimal
            double x = value.isIntegralNumber() ? value.bigIntegerValue().doubleValue()
                    : Double.parseDouble(value.decimalValue().toString());
            if (Double.isInfinite(x) || (kind.equals("float") && Float.isInfinite((float) x))) {
                throw new Invalid("field " + path + ": number out of range for a " + kind);
            }
        }
    }

    private static final class Bool extends Type {
        private static final long serialVersionUID = 1L;

        Bool() {
            super("a boolean");
        }

        @Override
        void check(JsonNode value, String path) throws Invalid {
            if (!value.isBoolean()) {
                throw fail(path, value);
            }
        }
    }

    /** A number or a numeric string of at most {@code scale} places and {@code precision} digits. */
    private static final class Decimal extends Type {
        private static final long serialVersionUID = 1L;
        private static final Pattern TEXT = Pattern.compile("(-?[0-9]+(?:\\.[0-9]+)?)(?:[eE]([+-]?[0-9]+))?");
        private static final int MAX_EXPONENT_DIGITS = 18; // Python's Decimal refuses more
        private final int precision;
        private final int scale;

        Decimal(int precision, int scale) {
            super("a number or a numeric string");
            this.precision = precision;
            this.scale = scale;
        }

        @Override
        void check(JsonNode value, String path) throws Invalid {
            if (value.isNumber()) {
                BigDecimal number = value.isIntegralNumber() ? new BigDecimal(value.bigIntegerValue())
                        : value.decimalValue();
                fits(number, 0, path);
                return;
            }
            Matcher text = value.isTextual() ? TEXT.matcher(value.textValue()) : null;
            if (text == null || !text.matches()) {
                throw fail(path, value);
            }
            String power = text.group(2) == null ? "" : text.group(2);
            String exponent = power.replaceFirst("^[+-]?0*", "");
            if (exponent.length() > MAX_EXPONENT_DIGITS) {
                throw tooMany(path);
            }
            long shift = exponent.isEmpty() ? 0 : Long.parseLong(exponent);
            fits(new BigDecimal(text.group(1)), power.startsWith("-") ? -shift : shift, path);
        }

        /** {@code mantissa × 10^shift} fits; zero fits every decimal. */
        private void fits(BigDecimal mantissa, long shift, String path) throws Invalid {
            if (mantissa.signum() == 0) {
                return;
            }
            BigDecimal significant = mantissa.stripTrailingZeros();
            long exponent = shift - significant.scale();
            if (-exponent > scale) {
                throw new Invalid("field " + path + ": more than " + scale + " decimal places for decimal("
                        + precision + "," + scale + ")");
            }
            if (significant.precision() + exponent > precision - scale) {
                throw tooMany(path);
            }
        }

        private Invalid tooMany(String path) {
            return new Invalid("field " + path + ": more than " + precision + " digits for decimal(" + precision
                    + "," + scale + ")");
        }
    }

    private static final class Day extends Type {
        private static final long serialVersionUID = 1L;
        private static final Pattern DATE = Pattern.compile("([0-9]{4})-([0-9]{2})-([0-9]{2})");

        Day() {
            super("a date (YYYY-MM-DD)");
        }

        @Override
        void check(JsonNode value, String path) throws Invalid {
            Matcher day = value.isTextual() ? DATE.matcher(value.textValue()) : null;
            if (day == null || !day.matches()) {
                throw fail(path, value);
            }
            if (!real(day.group(1), day.group(2), day.group(3))) {
                throw new Invalid("field " + path + ": " + value.textValue() + " is no day of the calendar");
            }
        }

        /** A day of years 1 to 9999 (Python's). */
        static boolean real(String year, String month, String day) {
            try {
                return LocalDate.of(Integer.parseInt(year), Integer.parseInt(month), Integer.parseInt(day))
                        .getYear() >= 1;
            } catch (DateTimeException exc) {
                return false;
            }
        }
    }

    /** An RFC 3339 date-time: with an offset ({@code timestamptz}) or without ({@code timestamp}). */
    private static final class Instant extends Type {
        private static final long serialVersionUID = 1L;
        private static final Pattern DATE_TIME = Pattern.compile(
                "([0-9]{4})-([0-9]{2})-([0-9]{2})[Tt]([0-9]{2}):([0-9]{2}):([0-9]{2})(?:\\.[0-9]+)?"
                + "([Zz]|[+-]([0-9]{2}):([0-9]{2}))?");
        private final boolean zoned;

        Instant(String kind) {
            super(kind.equals("timestamptz") ? "a date-time with offset (RFC 3339)" : "a date-time without offset");
            this.zoned = kind.equals("timestamptz");
        }

        @Override
        void check(JsonNode value, String path) throws Invalid {
            Matcher t = value.isTextual() ? DATE_TIME.matcher(value.textValue()) : null;
            if (t == null || !t.matches() || (t.group(7) != null) != zoned) {
                throw fail(path, value);
            }
            boolean offset = t.group(8) == null || (at(t, 8) <= 23 && at(t, 9) <= 59);
            if (!offset || !Day.real(t.group(1), t.group(2), t.group(3)) || at(t, 4) > 23 || at(t, 5) > 59
                    || at(t, 6) > 59) {
                throw new Invalid("field " + path + ": " + value.textValue() + " is no instant of the calendar");
            }
        }

        private static int at(Matcher match, int group) {
            return Integer.parseInt(match.group(group));
        }
    }

    private static final class Struct extends Type {
        private static final long serialVersionUID = 1L;
        private final String[] names;
        private final boolean[] required;
        private final Type[] types;

        Struct(JsonNode fields) {
            super("an object");
            int n = fields.size();
            names = new String[n];
            required = new boolean[n];
            types = new Type[n];
            for (int i = 0; i < n; i++) {
                JsonNode field = fields.get(i);
                names[i] = field.path("name").asText();
                required[i] = field.path("required").asBoolean(false);
                types[i] = compile(field.path("type"));
            }
        }

        @Override
        void check(JsonNode value, String path) throws Invalid {
            if (!value.isObject()) {
                throw fail(path, value);
            }
            members(value, path + ".");
        }

        void members(JsonNode object, String prefix) throws Invalid {
            for (int i = 0; i < names.length; i++) {
                JsonNode value = object.get(names[i]);
                if (value == null || value.isNull()) {
                    if (required[i]) {
                        throw new Invalid("missing field " + prefix + names[i]);
                    }
                } else {
                    types[i].check(value, prefix + names[i]);
                }
            }
        }
    }

    private static final class Sequence extends Type {
        private static final long serialVersionUID = 1L;
        private final Type items;
        private final boolean itemsRequired;
        private final int maxItems;

        Sequence(Type items, boolean itemsRequired, int maxItems) {
            super("an array");
            this.items = items;
            this.itemsRequired = itemsRequired;
            this.maxItems = maxItems;
        }

        @Override
        void check(JsonNode value, String path) throws Invalid {
            if (!value.isArray()) {
                throw fail(path, value);
            }
            if (maxItems >= 0 && value.size() > maxItems) {
                throw new Invalid("field " + path + ": more than " + maxItems + " items");
            }
            for (int i = 0; i < value.size(); i++) {
                JsonNode item = value.get(i);
                if (item.isNull()) {
                    if (itemsRequired) {
                        throw new Invalid("field " + path + "[" + i + "]: null item");
                    }
                } else {
                    items.check(item, path + "[" + i + "]");
                }
            }
        }
    }

    private static final class Mapping extends Type {
        private static final long serialVersionUID = 1L;
        private final Type values;
        private final boolean valuesRequired;

        Mapping(Type values, boolean valuesRequired) {
            super("an object");
            this.values = values;
            this.valuesRequired = valuesRequired;
        }

        @Override
        void check(JsonNode value, String path) throws Invalid {
            if (!value.isObject()) {
                throw fail(path, value);
            }
            for (Iterator<Map.Entry<String, JsonNode>> it = value.fields(); it.hasNext();) {
                Map.Entry<String, JsonNode> entry = it.next();
                String at = path + "." + entry.getKey();
                if (entry.getValue().isNull()) {
                    if (valuesRequired) {
                        throw new Invalid("field " + at + ": null value");
                    }
                } else {
                    values.check(entry.getValue(), at);
                }
            }
        }
    }
}
