// The JWS algorithms an OIDC token may be signed with: the asymmetric ones
// jose verifies on Node 20. `none` and HMAC (HS*) never appear: an HMAC
// algorithm would let a public key act as the shared secret. One list for the
// settings table (default and allowed values) and the verifier.
export const ASYMMETRIC_ALGORITHMS: readonly string[] = Object.freeze([
  'RS256',
  'RS384',
  'RS512',
  'PS256',
  'PS384',
  'PS512',
  'ES256',
  'ES384',
  'ES512',
  'EdDSA',
  'Ed25519',
]);
