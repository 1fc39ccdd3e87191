# %post of cert-agent ($1: 1 on install, 2 and more on upgrade): creates the system user
# cert-agent-serve, the state directory
# (0700), the directory of per-site configuration files (/etc/cert-agent/conf.d, 0700) and
# the install directory; on install enables cert-agent.timer and, when systemd
# runs, starts it; on upgrade restarts a running cert-agent-daemon.service and
# cert-agent-serve.service.
# The user `cert-agent serve` runs as once its ports are bound: its own, no home, no shell.
if ! getent passwd cert-agent-serve >/dev/null; then
    useradd --system --user-group --no-create-home --home-dir /nonexistent \
        --shell /sbin/nologin --comment "cert-agent standalone DCV server" \
        cert-agent-serve >/dev/null 2>&1 || :
fi
mkdir -p /var/lib/cert-agent
chmod 0700 /var/lib/cert-agent
if [ ! -d /etc/cert-agent/conf.d ]; then
    mkdir -p /etc/cert-agent/conf.d
    chmod 0700 /etc/cert-agent/conf.d
fi
if [ ! -d /etc/ssl/cert-agent ]; then
    mkdir -p /etc/ssl/cert-agent
    chmod 0755 /etc/ssl/cert-agent
fi
if [ -d /run/systemd/system ]; then
    systemctl daemon-reload >/dev/null 2>&1 || :
fi
if [ "$1" -eq 1 ]; then
    if [ -d /run/systemd/system ]; then
        systemctl enable --now cert-agent.timer >/dev/null 2>&1 || :
    elif command -v systemctl >/dev/null 2>&1; then
        systemctl enable cert-agent.timer >/dev/null 2>&1 || :
    fi
elif [ -d /run/systemd/system ]; then
    systemctl try-restart cert-agent-daemon.service cert-agent-serve.service >/dev/null 2>&1 || :
fi
