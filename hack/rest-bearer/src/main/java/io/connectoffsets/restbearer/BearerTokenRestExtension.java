package io.connectoffsets.restbearer;

import java.io.IOException;
import java.nio.file.Path;
import java.util.Map;

import org.apache.kafka.connect.rest.ConnectRestExtension;
import org.apache.kafka.connect.rest.ConnectRestExtensionContext;

/**
 * Makes a Connect worker's REST API demand {@code Authorization: Bearer <token>}, for the operator's
 * {@code authentication.type: bearer} to be proven against a real worker (test only, never shipped).
 *
 * <p>Worker properties: {@code rest.extension.classes=io.connectoffsets.restbearer.BearerTokenRestExtension}
 * and {@code rest.bearer.token.file=<path>}, a file holding the one accepted token. The file is read on
 * every request, so a test rotates the token by rewriting it, without restarting the worker.
 * Modelled on Kafka's own {@code BasicAuthSecurityRestExtension} (connect/basic-auth-extension).
 */
public class BearerTokenRestExtension implements ConnectRestExtension {

    /** The worker property naming the token file. */
    public static final String TOKEN_FILE_CONFIG = "rest.bearer.token.file";

    private Path tokenFile;

    @Override
    public void configure(Map<String, ?> configs) {
        Object value = configs.get(TOKEN_FILE_CONFIG);
        if (value == null || value.toString().isBlank()) {
            throw new IllegalArgumentException(TOKEN_FILE_CONFIG + " must name the file holding the accepted token");
        }
        tokenFile = Path.of(value.toString());
    }

    @Override
    public void register(ConnectRestExtensionContext restPluginContext) {
        restPluginContext.configurable().register(new BearerTokenFilter(tokenFile));
    }

    @Override
    public void close() throws IOException {
    }

    @Override
    public String version() {
        return "0";
    }
}
