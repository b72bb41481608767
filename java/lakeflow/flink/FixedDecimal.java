package lakeflow.flink;

/**
 * The text of Flink SQL's {@code CAST(CAST(x AS DECIMAL(p, s)) AS STRING)} for a finite double {@code x},
 * without {@code BigDecimal}: the synthetic records' JSON ({@link SensorRecords}) writes its numbers with it.
 *
 * <p>Flink's cast takes {@code BigDecimal.valueOf(x)} (the digits of {@link Double#toString}), rounds
 * it half up to {@code s} places ({@code setScale}) and gives NULL when the result has more than
 * {@code p} digits; the text is its plain string. Here the same rounding is done on those digits as
 * text: the discarded part is at least one half exactly when its first digit is 5 or more. Its
 * {@code BigInteger} divisions were most of the ingestion job's CPU time. Faster still, a value whose
 * scaled magnitude is below 1e9 and not within 1e-6 of a tie is rounded in double arithmetic: there
 * the error of {@code x * 10^s} (under 5e-7) cannot move it across the tie, so both roundings agree.
 */
public final class FixedDecimal {

    private FixedDecimal() {
    }

    private static final double[] POWERS = {1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9};

    /** The text of {@code x} rounded half up to {@code scale} places; null beyond {@code precision} digits. */
    public static String format(double x, int precision, int scale) {
        if (scale < POWERS.length) {
            double scaled = Math.abs(x) * POWERS[scale];
            double whole = Math.floor(scaled);
            double fraction = scaled - whole;
            if (scaled < 1e9 && Math.abs(fraction - 0.5) > 1e-6) {
                long unscaled = (long) whole + (fraction > 0.5 ? 1 : 0);
                char[] digits = Long.toString(unscaled).toCharArray();
                return plain(x < 0 && unscaled != 0, digits, digits.length, precision, scale);
            }
        }
        return exact(x, precision, scale);
    }

    private static String exact(double x, int precision, int scale) {
        String text = Double.toString(x);
        int end = text.indexOf('E');
        int exponent = end < 0 ? 0 : Integer.parseInt(text.substring(end + 1));
        if (end < 0) {
            end = text.length();
        }
        boolean negative = text.charAt(0) == '-';
        char[] digits = new char[end];
        int count = 0;
        int point = -1;
        for (int i = negative ? 1 : 0; i < end; i++) {
            char c = text.charAt(i);
            if (c == '.') {
                point = count;
            } else {
                digits[count++] = c;
            }
        }
        if (point < 0) {
            point = count;
        }
        int keep = point + exponent + scale; // digits of the unscaled result, counted from digits[0]
        if (keep < 0) {
            return plain(false, new char[] {'0'}, 1, precision, scale);
        }
        char[] unscaled = new char[keep + 1]; // one more for a carry out of the first digit
        unscaled[0] = '0';
        for (int i = 0; i < keep; i++) {
            unscaled[i + 1] = i < count ? digits[i] : '0';
        }
        if (keep < count && digits[keep] >= '5') {
            int i = keep;
            while (unscaled[i] == '9') {
                unscaled[i--] = '0';
            }
            unscaled[i]++;
        }
        int first = 0;
        while (first < keep && unscaled[first] == '0') {
            first++;
        }
        char[] significant = new char[keep + 1 - first];
        System.arraycopy(unscaled, first, significant, 0, significant.length);
        boolean zero = significant.length == 1 && significant[0] == '0';
        return plain(negative && !zero, significant, significant.length, precision, scale);
    }

    private static String plain(boolean negative, char[] unscaled, int length, int precision, int scale) {
        if (length > precision) {
            return null;
        }
        StringBuilder out = new StringBuilder(length + scale + 3);
        if (negative) {
            out.append('-');
        }
        if (scale == 0) {
            return out.append(unscaled, 0, length).toString();
        }
        int whole = length - scale;
        if (whole <= 0) {
            out.append("0.");
            for (int i = whole; i < 0; i++) {
                out.append('0');
            }
            return out.append(unscaled, 0, length).toString();
        }
        return out.append(unscaled, 0, whole).append('.').append(unscaled, whole, scale).toString();
    }
}
