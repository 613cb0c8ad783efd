// The Authenticator that `auth.*` and `auth.oidc.*` settings describe. Ingest
// and query authenticate the same way (query contract §4: "shared with
// ingest"), so both build it here from the same settings.

import type { Settings } from '../config/settings.js';
import { Authenticator } from './authenticator.js';
import { loadTokenFile } from './static-tokens.js';

/**
 * The static tokens (`auth.bearerTokens`, then those of `auth.bearerTokensFile`)
 * and, when `auth.oidc.issuer` is set, the OIDC verifier's options. An
 * unreadable or bad token file is a ConfigError (see loadTokenFile).
 */
export function authenticatorFromSettings(s: Settings): Authenticator {
  const bearerTokens = [...s.authBearerTokens];
  if (s.authBearerTokensFile !== undefined) bearerTokens.push(...loadTokenFile(s.authBearerTokensFile));
  return new Authenticator({
    bearerTokens,
    ...(s.oidcIssuer !== undefined
      ? {
          oidc: {
            issuer: s.oidcIssuer,
            ...(s.oidcAudience !== undefined ? { audience: s.oidcAudience } : {}),
            ...(s.oidcJwksFile !== undefined ? { jwksFile: s.oidcJwksFile } : { jwksUrl: s.oidcJwksUrl! }),
            algorithms: s.oidcAlgorithms,
            clockSkewSecs: s.oidcClockSkewSecs,
            cacheSize: s.oidcTokenCacheSize,
            jwksCooldownMs: s.oidcJwksCooldownSecs * 1000,
            jwksTimeoutMs: s.oidcJwksTimeoutMs,
          },
        }
      : {}),
  });
}
