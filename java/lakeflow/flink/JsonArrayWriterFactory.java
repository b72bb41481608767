package lakeflow.flink;

import java.io.IOException;
import java.nio.charset.StandardCharsets;

import org.apache.flink.api.common.serialization.BulkWriter;
import org.apache.flink.core.fs.FSDataOutputStream;
import org.apache.flink.types.Row;

/**
 * Writes each part file of a {@code FileSink} as one JSON array: {@code [r1,\nr2,\n…rN]\n}.
 *
 * <p>Elements are {@link Row}s whose field 0 is one JSON document as a string (built on the JVM
 * by the job's SQL); it is written as is, one record per line, so a file holds exactly as many
 * records as newlines. Bulk formats roll on every checkpoint, and the sink opens a part file only
 * for its first element: a checkpoint with no records leaves no file. Should a writer still be
 * finished without an element, it writes {@code []}, so every part file is a valid JSON array.
 */
public final class JsonArrayWriterFactory implements BulkWriter.Factory<Row> {

    private static final long serialVersionUID = 1L;

    @Override
    public BulkWriter<Row> create(FSDataOutputStream out) {
        return new JsonArrayWriter(out);
    }

    /** One part file. Buffers in memory and hands the stream large writes. */
    static final class JsonArrayWriter implements BulkWriter<Row> {
        private static final byte[] OPEN = {'['};
        private static final byte[] SEPARATOR = {',', '\n'};
        private static final byte[] CLOSE = {']', '\n'};
        private static final byte[] EMPTY = {'[', ']'};
        private static final int BUFFER = 64 * 1024;

        private final FSDataOutputStream out;
        private final byte[] buffer = new byte[BUFFER];
        private int used;
        private long records;

        JsonArrayWriter(FSDataOutputStream out) {
            this.out = out;
        }

        @Override
        public void addElement(Row row) throws IOException {
            Object json = row.getField(0);
            if (json == null) {
                throw new IllegalArgumentException("JsonArrayWriter: field 0 of row " + records
                        + " is null, expected a JSON document as a string");
            }
            write(records == 0 ? OPEN : SEPARATOR);
            write(json.toString().getBytes(StandardCharsets.UTF_8));
            records++;
        }

        @Override
        public void flush() throws IOException {
            drain();
            out.flush();
        }

        /**
         * Closes the array and hands over the bytes. Neither closes nor syncs the stream: the sink
         * does that when it commits the file (on S3 a sync would complete the upload early).
         */
        @Override
        public void finish() throws IOException {
            write(records == 0 ? EMPTY : CLOSE);
            flush();
        }

        private void write(byte[] bytes) throws IOException {
            if (bytes.length > buffer.length - used) {
                drain();
                if (bytes.length > buffer.length) {
                    out.write(bytes);
                    return;
                }
            }
            System.arraycopy(bytes, 0, buffer, used, bytes.length);
            used += bytes.length;
        }

        private void drain() throws IOException {
            if (used > 0) {
                out.write(buffer, 0, used);
                used = 0;
            }
        }
    }
}
