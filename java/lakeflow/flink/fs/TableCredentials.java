package lakeflow.flink.fs;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.time.Instant;
import java.time.OffsetDateTime;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.regex.Pattern;

import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.JsonNode;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.ObjectMapper;

/**
 * One table's vended credentials, as {@code <command> credential-process --namespace NS --table T}
 * prints them (AWS process credentials: AccessKeyId, SecretAccessKey, SessionToken, Expiration).
 * Never shown: {@link #toString} names the table only.
 */
final class TableCredentials {

    private static final ObjectMapper MAPPER = new ObjectMapper();
    private static final long TIMEOUT_S = 120;
    private static final Pattern NAME = Pattern.compile("[A-Za-z0-9_.-]+");

    final String accessKey;
    final String secretKey;
    final String sessionToken; // null when the catalog vends long-lived keys
    final Instant expiresAt; // null: no expiry known
    private final String table;

    private TableCredentials(String table, String accessKey, String secretKey, String sessionToken, Instant expiresAt) {
        this.table = table;
        this.accessKey = accessKey;
        this.secretKey = secretKey;
        this.sessionToken = sessionToken;
        this.expiresAt = expiresAt;
    }

    /**
     * Run {@code command} (a shell command line, as an AWS profile's credential_process) for the table
     * {@code namespace.table}, whose names hold letters, digits, '.', '_' and '-' only; its stderr goes to
     * this process's.
     */
    static TableCredentials vend(String command, String namespace, String table) throws IOException {
        if (!NAME.matcher(namespace).matches() || !NAME.matcher(table).matches()) {
            throw new IOException("lakeflow-s3: not a table name: " + namespace + "." + table);
        }
        List<String> argv = List.of("sh", "-c",
                command + " credential-process --namespace " + namespace + " --table " + table);
        Process process = new ProcessBuilder(argv).redirectError(ProcessBuilder.Redirect.INHERIT).start();
        process.getOutputStream().close();
        byte[] out;
        try (InputStream stdout = process.getInputStream()) {
            out = readAll(stdout);
        }
        String name = namespace + "." + table;
        try {
            if (!process.waitFor(TIMEOUT_S, TimeUnit.SECONDS)) {
                process.destroyForcibly();
                throw new IOException("lakeflow-s3: vending credentials for " + name + " took longer than " + TIMEOUT_S + " s");
            }
        } catch (InterruptedException exc) {
            Thread.currentThread().interrupt();
            throw new IOException("lakeflow-s3: interrupted while vending credentials for " + name);
        }
        if (process.exitValue() != 0) {
            throw new IOException("lakeflow-s3: credential-process for " + name + " exited with "
                    + process.exitValue() + " (its error is in this process's log)");
        }
        JsonNode answer;
        try {
            answer = MAPPER.readTree(out);
        } catch (IOException exc) {
            throw new IOException("lakeflow-s3: the credentials of " + name + " are not JSON");
        }
        if (answer == null || !answer.hasNonNull("AccessKeyId") || !answer.hasNonNull("SecretAccessKey")) {
            throw new IOException("lakeflow-s3: no credentials vended for " + name + " (AccessKeyId, SecretAccessKey)");
        }
        return new TableCredentials(name, answer.get("AccessKeyId").asText(), answer.get("SecretAccessKey").asText(),
                answer.hasNonNull("SessionToken") ? answer.get("SessionToken").asText() : null,
                answer.hasNonNull("Expiration") ? instant(answer.get("Expiration").asText()) : null);
    }

    private static Instant instant(String text) {
        try {
            return Instant.parse(text);
        } catch (RuntimeException exc) {
            return OffsetDateTime.parse(text).toInstant();
        }
    }

    private static byte[] readAll(InputStream in) throws IOException {
        ByteArrayOutputStream buffer = new ByteArrayOutputStream();
        byte[] chunk = new byte[8192];
        for (int n; (n = in.read(chunk)) > 0; ) {
            buffer.write(chunk, 0, n);
        }
        return buffer.toByteArray();
    }

    /** When to vend again: five minutes before expiry, or halfway through the time left when that is shorter. */
    Instant refreshAt(Instant now) {
        if (expiresAt == null) {
            return Instant.MAX;
        }
        long leftMs = Math.max(0, expiresAt.toEpochMilli() - now.toEpochMilli());
        return expiresAt.minusMillis(Math.min(300_000L, leftMs / 2));
    }

    @Override
    public String toString() {
        return "TableCredentials[" + table + "]";
    }
}
