#include "collectives/communicator.h"
