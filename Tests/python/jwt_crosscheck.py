#!/usr/bin/env python3
"""Cross-checks DialtoneCrypto's JWTs against PyJWT, an independent implementation.

Driven by Tests/DialtoneCryptoTests/JWTCrosscheckTests.swift. Exit status: 0 success,
1 check failed, 2 usage error or missing dependency (run scripts/deps.sh).

  check                          are PyJWT and cryptography importable?
  genkeys DIR                    write test keys (see KEY_FILES) into DIR
  verify --alg A KEY --token T [--expect-claims JSON] [--expect-kid K]
                                 verify T with PyJWT; print its claims as JSON
  sign --alg A KEY --claims JSON [--kid K]
                                 print a token signed by PyJWT
where KEY is --key FILE or --key-pem TEXT (PEM) or --secret-hex HEX (HS256).
"""
import argparse
import json
import os
import sys

try:
    import jwt
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec, rsa
except ImportError as error:  # the Swift test shows this text, so say how to fix it
    print(f"jwt_crosscheck: missing Python module ({error}); run scripts/deps.sh "
          "(pip install pyjwt cryptography)", file=sys.stderr)
    sys.exit(2)

KEY_FILES = {
    "ec_p256.p8": "EC P-256 private key, PKCS#8 PEM (Apple .p8 shape)",
    "ec_p256.sec1.pem": "same key, SEC1 'EC PRIVATE KEY' PEM",
    "ec_p256.pub.pem": "its SubjectPublicKeyInfo PEM",
    "ec_p384.p8": "EC P-384 private key (wrong curve for ES256)",
    "rsa2048.pkcs1.pem": "RSA 2048 private key, PKCS#1 'RSA PRIVATE KEY' PEM",
    "rsa2048.pkcs8.pem": "same key, PKCS#8 PEM",
    "rsa2048.pub.pem": "its SubjectPublicKeyInfo PEM",
    "rsa1024.pkcs8.pem": "RSA 1024 private key (too small for RS256)",
    "rsa2048.encrypted.pem": "the RSA 2048 key, passphrase-encrypted PKCS#8",
    "service_account.json": "Google service-account shaped JSON holding the RSA 2048 key",
}


def private_pem(key, fmt, password=None):
    encryption = (serialization.BestAvailableEncryption(password) if password
                  else serialization.NoEncryption())
    return key.private_bytes(serialization.Encoding.PEM, fmt, encryption)


def public_pem(key):
    return key.public_key().public_bytes(serialization.Encoding.PEM,
                                         serialization.PublicFormat.SubjectPublicKeyInfo)


def genkeys(directory):
    os.makedirs(directory, exist_ok=True)
    pkcs8 = serialization.PrivateFormat.PKCS8
    traditional = serialization.PrivateFormat.TraditionalOpenSSL
    ec256 = ec.generate_private_key(ec.SECP256R1())
    ec384 = ec.generate_private_key(ec.SECP384R1())
    rsa2048 = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    rsa1024 = rsa.generate_private_key(public_exponent=65537, key_size=1024)
    files = {
        "ec_p256.p8": private_pem(ec256, pkcs8),
        "ec_p256.sec1.pem": private_pem(ec256, traditional),
        "ec_p256.pub.pem": public_pem(ec256),
        "ec_p384.p8": private_pem(ec384, pkcs8),
        "rsa2048.pkcs1.pem": private_pem(rsa2048, traditional),
        "rsa2048.pkcs8.pem": private_pem(rsa2048, pkcs8),
        "rsa2048.pub.pem": public_pem(rsa2048),
        "rsa1024.pkcs8.pem": private_pem(rsa1024, pkcs8),
        "rsa2048.encrypted.pem": private_pem(rsa2048, pkcs8, b"correct horse"),
        "service_account.json": json.dumps({
            "type": "service_account",
            "client_email": "dialtone-test@example.iam.gserviceaccount.com",
            "private_key_id": "0123456789abcdef",
            "private_key": private_pem(rsa2048, pkcs8).decode(),
        }, indent=2).encode(),
    }
    for name, data in files.items():
        with open(os.path.join(directory, name), "wb") as handle:
            handle.write(data)
    print(json.dumps(sorted(files)))
    return 0


def load_key(args, private):
    if args.secret_hex is not None:
        return bytes.fromhex(args.secret_hex)
    if args.key_pem is not None:
        data = args.key_pem.encode()
    elif args.key is not None:
        with open(args.key, "rb") as handle:
            data = handle.read()
    else:
        print("jwt_crosscheck: give --key, --key-pem or --secret-hex", file=sys.stderr)
        sys.exit(2)
    # PyJWT accepts PEM text directly; loading here gives clearer errors.
    if private:
        return serialization.load_pem_private_key(data, password=None)
    return serialization.load_pem_public_key(data)


def verify(args):
    key = load_key(args, private=False)
    try:
        header = jwt.get_unverified_header(args.token)
        claims = jwt.decode(args.token, key, algorithms=[args.alg],
                            options={"require": ["exp"], "verify_aud": False})
    except jwt.PyJWTError as error:
        print(f"jwt_crosscheck: PyJWT rejected the token: {type(error).__name__}: {error}",
              file=sys.stderr)
        return 1
    problems = []
    if header.get("alg") != args.alg:
        problems.append(f"header alg {header.get('alg')!r} != {args.alg!r}")
    if header.get("typ") != "JWT":
        problems.append(f"header typ {header.get('typ')!r} != 'JWT'")
    if args.expect_kid is not None and header.get("kid") != args.expect_kid:
        problems.append(f"header kid {header.get('kid')!r} != {args.expect_kid!r}")
    if args.expect_claims:
        for name, value in json.loads(args.expect_claims).items():
            if claims.get(name) != value:
                problems.append(f"claim {name}: {claims.get(name)!r} != {value!r}")
    if problems:
        print("jwt_crosscheck: " + "; ".join(problems), file=sys.stderr)
        return 1
    print(json.dumps(claims, sort_keys=True))
    return 0


def sign(args):
    key = load_key(args, private=True)
    headers = {"kid": args.kid} if args.kid else None
    print(jwt.encode(json.loads(args.claims), key, algorithm=args.alg, headers=headers))
    return 0


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("check")
    gen = commands.add_parser("genkeys")
    gen.add_argument("directory")
    for name in ("verify", "sign"):
        command = commands.add_parser(name)
        command.add_argument("--alg", required=True, choices=["HS256", "ES256", "RS256"])
        command.add_argument("--key")
        command.add_argument("--key-pem")
        command.add_argument("--secret-hex")
        if name == "verify":
            command.add_argument("--token", required=True)
            command.add_argument("--expect-claims")
            command.add_argument("--expect-kid")
        else:
            command.add_argument("--claims", required=True)
            command.add_argument("--kid")
    args = parser.parse_args()
    if args.command == "check":
        print(f"pyjwt {jwt.__version__}")
        return 0
    if args.command == "genkeys":
        return genkeys(args.directory)
    return verify(args) if args.command == "verify" else sign(args)


if __name__ == "__main__":
    sys.exit(main())
