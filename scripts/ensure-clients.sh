#!/usr/bin/env bash
# Make sure the real Redis clients the smoke tests (tests/clients/, tests/it/clients.rs) drive
# are installed:
#   - PHP CLI with phpredis and predis (Debian/Ubuntu packages php-cli php-redis php-predis),
#     installed with apt-get when run as root, otherwise the exact command is printed (exit 1);
#   - redis-py and hiredis from PyPI in a virtualenv at target/pyenv (no system pip is touched;
#     python3-venv is installed with apt-get when `python3 -m venv` does not work).
# Idempotent and quick when everything is already there.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
venv="$root/target/pyenv"
is_root() { [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null 2>&1; }

apt_updated=0
apt_install() {
    export DEBIAN_FRONTEND=noninteractive
    if ((apt_updated == 0)); then
        # -o DPkg::Lock::Timeout: wait up to 5 min for another apt or dpkg (unattended-upgrades,
        # another ensure script) to release its lock instead of failing at once (apt >= 1.9.11).
        apt-get -o DPkg::Lock::Timeout=300 update
        apt_updated=1
    fi
    apt-get -o DPkg::Lock::Timeout=300 install -y --no-install-recommends "$@"
}

# --- PHP: phpredis (class Redis) and predis (Predis\Client) ---------------------------------
php_ok() {
    command -v php >/dev/null 2>&1 || return 1
    php -r 'exit(class_exists("Redis") ? 0 : 1);' 2>/dev/null || return 1
    php -r 'require "Predis/autoload.php"; exit(class_exists("Predis\\Client") ? 0 : 1);' \
        2>/dev/null || return 1
}

if ! php_ok; then
    echo "missing: php-cli with phpredis and predis" >&2
    if is_root; then
        apt_install php-cli php-redis php-predis
    else
        echo "sudo apt-get install -y php-cli php-redis php-predis"
        exit 1
    fi
    php_ok || {
        echo "error: php, phpredis or predis still not usable after installing" >&2
        exit 1
    }
fi

# --- Python: redis-py + hiredis in target/pyenv ---------------------------------------------
py_ok() {
    [[ -x $venv/bin/python ]] && "$venv/bin/python" -c 'import redis, hiredis' 2>/dev/null
}

if ! py_ok; then
    if ! command -v python3 >/dev/null 2>&1; then
        echo "missing: python3" >&2
        if is_root; then
            apt_install python3 python3-venv
        else
            echo "sudo apt-get install -y python3 python3-venv"
            exit 1
        fi
    fi
    if [[ ! -x $venv/bin/python ]] || ! "$venv/bin/python" -m pip --version >/dev/null 2>&1; then
        rm -rf "$venv"
        mkdir -p "$root/target"
        if ! python3 -m venv "$venv" 2>/dev/null; then
            rm -rf "$venv"
            echo "missing: python3-venv (python3 -m venv failed)" >&2
            if is_root; then
                apt_install python3-venv
            else
                echo "sudo apt-get install -y python3-venv"
                exit 1
            fi
            python3 -m venv "$venv"
        fi
    fi
    "$venv/bin/python" -m pip install --quiet redis hiredis
    py_ok || {
        echo "error: redis-py/hiredis still not importable in $venv after installing" >&2
        exit 1
    }
fi

echo "ok: $(php -r 'require "Predis/autoload.php"; echo "php ", PHP_VERSION, ", phpredis ", phpversion("redis"), ", predis ", Predis\Client::VERSION;')," \
    "$("$venv/bin/python" -c 'import redis, hiredis, sys; print("python %d.%d, redis-py %s, hiredis %s" % (sys.version_info[0], sys.version_info[1], redis.__version__, hiredis.__version__))')"
