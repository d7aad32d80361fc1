package io.connectoffsets.restbearer;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.MessageDigest;

import jakarta.ws.rs.container.ContainerRequestContext;
import jakarta.ws.rs.container.ContainerRequestFilter;
import jakarta.ws.rs.core.HttpHeaders;
import jakarta.ws.rs.core.MediaType;
import jakarta.ws.rs.core.Response;

/**
 * Refuses every REST request whose {@code Authorization} header is not {@code Bearer <the token in the file>},
 * with 401 and Connect's own error shape {@code {"error_code":401,"message":"..."}}.
 *
 * <p>The token file is re-read on each request (a test rotates it); an unreadable or empty file refuses
 * everything. Internal worker-to-worker requests are not let through: the tests run one worker only.
 */
public class BearerTokenFilter implements ContainerRequestFilter {

    private static final String PREFIX = "Bearer ";

    private final Path tokenFile;

    public BearerTokenFilter(Path tokenFile) {
        this.tokenFile = tokenFile;
    }

    @Override
    public void filter(ContainerRequestContext requestContext) {
        String header = requestContext.getHeaderString(HttpHeaders.AUTHORIZATION);
        if (header == null || !header.startsWith(PREFIX)) {
            refuse(requestContext, "missing bearer token");
            return;
        }
        String expected;
        try {
            expected = Files.readString(tokenFile, StandardCharsets.UTF_8).strip();
        } catch (IOException e) {
            refuse(requestContext, "the worker cannot read its token file");
            return;
        }
        byte[] given = header.substring(PREFIX.length()).strip().getBytes(StandardCharsets.UTF_8);
        // Constant time, so the comparison does not tell how much of a guess was right.
        if (expected.isEmpty() || !MessageDigest.isEqual(given, expected.getBytes(StandardCharsets.UTF_8))) {
            refuse(requestContext, "invalid bearer token");
        }
    }

    private static void refuse(ContainerRequestContext requestContext, String message) {
        // The message is fixed text: never echo what the client sent.
        String body = "{\"error_code\":401,\"message\":\"" + message + "\"}";
        requestContext.abortWith(
                Response.status(Response.Status.UNAUTHORIZED)
                        .header(HttpHeaders.WWW_AUTHENTICATE, "Bearer")
                        .type(MediaType.APPLICATION_JSON_TYPE)
                        .entity(body)
                        .build());
    }
}
