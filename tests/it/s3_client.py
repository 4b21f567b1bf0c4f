"""The object-store tests' own S3 client (boto3, installed with moto): what the tests put on the
server and read back does not go through neardup's client.

    python s3_client.py ENDPOINT create BUCKET
    python s3_client.py ENDPOINT put BUCKET KEY FILE      (FILE '-' reads standard input)
    python s3_client.py ENDPOINT get BUCKET KEY           (exit 3 when there is no such object)
    python s3_client.py ENDPOINT keys BUCKET PREFIX       (one key per line, sorted)
    python s3_client.py ENDPOINT download BUCKET PREFIX DIR
"""

import os
import sys

import boto3
from botocore.exceptions import ClientError


def main(endpoint, command, *args):
    s3 = boto3.client(
        "s3",
        endpoint_url=endpoint,
        region_name="us-east-1",
        aws_access_key_id="neardup-test",
        aws_secret_access_key="neardup-test-secret",
    )
    if command == "create":
        s3.create_bucket(Bucket=args[0])
    elif command == "put":
        bucket, key, path = args
        body = sys.stdin.buffer.read() if path == "-" else open(path, "rb").read()
        s3.put_object(Bucket=bucket, Key=key, Body=body)
    elif command == "get":
        bucket, key = args
        try:
            body = s3.get_object(Bucket=bucket, Key=key)["Body"].read()
        except ClientError as e:
            if e.response["Error"]["Code"] in ("NoSuchKey", "404"):
                sys.exit(3)
            raise
        sys.stdout.buffer.write(body)
    elif command in ("keys", "download"):
        bucket, prefix = args[0], args[1]
        keys = []
        for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
            keys.extend(o["Key"] for o in page.get("Contents", []))
        keys.sort()
        if command == "keys":
            print("\n".join(keys))
            return
        folder = args[2]
        for key in keys:
            relative = key[len(prefix):].lstrip("/")
            target = os.path.join(folder, relative)
            os.makedirs(os.path.dirname(target), exist_ok=True)
            s3.download_file(bucket, key, target)
    else:
        sys.exit(f"unknown command {command}")


if __name__ == "__main__":
    main(*sys.argv[1:])
