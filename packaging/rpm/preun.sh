# %preun of cert-agent ($1: 0 on erase, 1 and more on upgrade): on erase, disables and stops
# the timer, the daemon and the standalone DCV server and stops a renewal run in progress.
if [ "$1" -eq 0 ] && command -v systemctl >/dev/null 2>&1; then
    if [ -d /run/systemd/system ]; then
        systemctl disable --now cert-agent.timer cert-agent-daemon.service cert-agent-serve.service >/dev/null 2>&1 || :
        systemctl stop cert-agent.service >/dev/null 2>&1 || :
    else
        systemctl disable cert-agent.timer cert-agent-daemon.service cert-agent-serve.service >/dev/null 2>&1 || :
    fi
fi
